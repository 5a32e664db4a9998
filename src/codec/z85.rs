//! Z85 (ZeroMQ RFC 32) as Delta Lake uses it.
//!
//! ```text
//!  4 bytes (big-endian u32)  ──►  5 characters, most significant base-85 digit first
//! ```
//!
//! Delta's variant for inputs whose length is not a multiple of 4: pad the input
//! with zero bytes up to the next multiple of 4 and encode that; the reader is
//! told the true length (`sizeInBytes`) and drops the padding. The output is
//! therefore always `ceil(n / 4) * 5` characters.
//!
//! The `z85` crate (3.x) pads differently: the last group is shortened and
//! prefixed with one `#` per missing byte (a leading `#` can never start a real
//! group, since `'#'` is digit 84 and 84·85⁴ > 2³²). delta-kernel-rs wrote a few
//! inline DVs that way; [`decode`] accepts that form in the final group only, so
//! such tables stay readable. [`encode`] always writes Delta's form.

use crate::error::{Error, Result};

/// The 85 characters, in digit order.
pub const ALPHABET: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Bytes per group.
const BYTES_PER_GROUP: usize = 4;
/// Characters per group.
const CHARS_PER_GROUP: usize = 5;
/// Marker for a missing byte in the `z85` crate's tail form.
const TAIL_PAD_CHAR: u8 = b'#';
/// Sentinel in [`DECODE_TABLE`] for bytes outside the alphabet.
const INVALID: u8 = 0xFF;

// Indexes are `ALPHABET[i]` (a u8) into 256 entries and i < 85: always in bounds.
#[allow(clippy::indexing_slicing)]
const DECODE_TABLE: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        table[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Number of characters [`encode`] produces for `n` bytes.
pub const fn encoded_len(n: usize) -> usize {
    n.div_ceil(BYTES_PER_GROUP) * CHARS_PER_GROUP
}

/// Encode `bytes`, zero-padding the last group (Delta's rule).
pub fn encode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(encoded_len(bytes.len()));
    for chunk in bytes.chunks(BYTES_PER_GROUP) {
        let mut group = [0u8; BYTES_PER_GROUP];
        group
            .iter_mut()
            .zip(chunk.iter())
            .for_each(|(g, b)| *g = *b);
        let mut value = u32::from_be_bytes(group);
        let mut digits = [0u8; CHARS_PER_GROUP];
        for d in digits.iter_mut().rev() {
            // `value % 85` < 85 = ALPHABET.len().
            #[allow(clippy::indexing_slicing)]
            let c = ALPHABET[(value % 85) as usize];
            *d = c;
            value /= 85;
        }
        out.extend_from_slice(&digits);
    }
    // Every byte pushed comes from ALPHABET, which is ASCII: one char each.
    out.into_iter().map(char::from).collect()
}

fn digit(c: u8, position: usize) -> Result<u64> {
    // A u8 always indexes a 256-entry table.
    #[allow(clippy::indexing_slicing)]
    let entry = DECODE_TABLE[c as usize];
    match entry {
        INVALID => Err(Error::InvalidZ85 {
            position,
            reason: format!("{:?} is not a Z85 character", char::from(c)),
        }),
        d => Ok(u64::from(d)),
    }
}

/// Value of a run of base-85 digits starting at character `start`.
fn group_value(chars: &[u8], start: usize) -> Result<u64> {
    let mut value = 0u64;
    for (i, &c) in chars.iter().enumerate() {
        value = value * 85 + digit(c, start + i)?;
    }
    Ok(value)
}

/// Decode `text` into exactly `len` bytes.
///
/// `text` must be `encoded_len(len)` characters. Padding bytes past `len` are
/// dropped. Any character outside the alphabet, or a group worth more than
/// 2³²−1, is an [`Error::InvalidZ85`] naming the character position.
pub fn decode(text: &str, len: usize) -> Result<Vec<u8>> {
    let chars = text.as_bytes();
    let expected = encoded_len(len);
    if chars.len() != expected {
        return Err(Error::InvalidZ85 {
            position: chars.len().min(expected),
            reason: format!(
                "length {} does not encode {len} bytes (expected {expected} characters)",
                chars.len()
            ),
        });
    }
    let mut out = Vec::with_capacity(expected / CHARS_PER_GROUP * BYTES_PER_GROUP);
    let groups = chars.chunks_exact(CHARS_PER_GROUP);
    let last_index = groups.len().saturating_sub(1);
    for (g, group) in groups.enumerate() {
        let start = g * CHARS_PER_GROUP;
        let pads = group.iter().take_while(|&&c| c == TAIL_PAD_CHAR).count();
        if pads > 0 && pads < BYTES_PER_GROUP && g == last_index {
            // The `z85` crate's tail: `pads` bytes are missing, the remaining
            // digits hold the (4 - pads) tail bytes as a big-endian number.
            let kept = BYTES_PER_GROUP - pads;
            let digits = group.get(pads..).unwrap_or_default();
            let value = group_value(digits, start + pads)?;
            if value >= 1u64 << (8 * kept) {
                return Err(Error::InvalidZ85 {
                    position: start,
                    reason: format!("padded tail group value {value} exceeds {kept} bytes"),
                });
            }
            let bytes = value.to_be_bytes();
            out.extend_from_slice(bytes.get(8 - kept..).unwrap_or_default());
            continue;
        }
        let value = group_value(group, start)?;
        let word = u32::try_from(value).map_err(|_| Error::InvalidZ85 {
            position: start,
            reason: format!("group value {value} exceeds 2^32-1"),
        })?;
        out.extend_from_slice(&word.to_be_bytes());
    }
    if out.len() < len {
        return Err(Error::InvalidZ85 {
            position: chars.len(),
            reason: format!("decoded {} bytes, expected {len}", out.len()),
        });
    }
    out.truncate(len);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc32_hello_world() {
        let bytes = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B];
        assert_eq!(encode(&bytes), "HelloWorld");
        assert_eq!(decode("HelloWorld", 8).unwrap(), bytes);
    }

    #[test]
    fn pads_with_zeros_at_the_end() {
        // 2 bytes → one 5-char group of 0xAB_CD_00_00.
        let text = encode(&[0xAB, 0xCD]);
        assert_eq!(text.len(), 5);
        assert_eq!(text, encode(&[0xAB, 0xCD, 0, 0]));
        assert_eq!(decode(&text, 2).unwrap(), vec![0xAB, 0xCD]);
    }

    #[test]
    fn rejects_bad_characters_and_lengths() {
        assert!(matches!(
            decode("Hello\"orld", 8),
            Err(Error::InvalidZ85 { position: 5, .. })
        ));
        assert!(decode("Hello", 8).is_err());
        // '%%%%%' = 82·(85⁴+85³+85²+85+1) > u32::MAX.
        assert!(decode("%%%%%", 4).is_err());
    }

    #[test]
    fn accepts_z85_crate_tail() {
        for len in 1..=3usize {
            let data: Vec<u8> = (1..=len as u8 + 4).collect();
            let theirs = z85::encode(&data);
            assert_eq!(decode(&theirs, data.len()).unwrap(), data, "len {len}");
        }
    }
}
