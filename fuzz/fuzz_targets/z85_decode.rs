//! Z85 decoding of arbitrary text, and the encode/decode round trip.
//!
//! Input layout: byte 0 (`ctl`) selects the mode, the rest is the payload.
//! * `ctl & 1 == 0`: decode. The text is the payload, either as (lossy) UTF-8
//!   or, when `ctl & 16` is set, each byte mapped onto the Z85 alphabet so most
//!   inputs are well-formed. The length is either derived from the text length
//!   (`ctl & 2 == 0`: `groups * 4 - ((ctl >> 2) & 3)`, so the length check
//!   passes and the groups are really decoded) or read from two payload bytes.
//!   Properties: success yields exactly `len` bytes; when `len % 4 == 0` there
//!   is no padding to drop, so `encode` of the output must give back the text.
//! * `ctl & 1 == 1`: the payload is a byte string `b`:
//!   `decode(&encode(b), b.len()) == b` and `encode(b).len() == encoded_len(b.len())`.
#![no_main]

use deltadv::codec::z85;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    if ctl & 1 == 1 {
        let text = z85::encode(rest);
        assert_eq!(text.len(), z85::encoded_len(rest.len()));
        match z85::decode(&text, rest.len()) {
            Ok(back) => assert_eq!(back, rest, "encode/decode round trip"),
            Err(e) => panic!("decode of encode output failed: {e}"),
        }
        return;
    }

    let (explicit_len, payload) = if ctl & 2 == 0 {
        (None, rest)
    } else if let [a, b, payload @ ..] = rest {
        (Some(usize::from(u16::from_le_bytes([*a, *b]))), payload)
    } else {
        return;
    };
    let text: String = if ctl & 16 != 0 {
        payload
            .iter()
            .map(|&b| char::from(z85::ALPHABET[usize::from(b) % z85::ALPHABET.len()]))
            .collect()
    } else {
        String::from_utf8_lossy(payload).into_owned()
    };
    let len = explicit_len.unwrap_or_else(|| {
        (text.len() / 5 * 4).saturating_sub(usize::from((ctl >> 2) & 3))
    });
    // In the derived-length mode, use exactly the whole groups of the text.
    let text = if explicit_len.is_none() {
        text.get(..z85::encoded_len(len)).unwrap_or(&text)
    } else {
        &text
    };
    if let Ok(out) = z85::decode(text, len) {
        assert_eq!(out.len(), len, "decode returned the wrong length");
        if len % 4 == 0 {
            assert_eq!(z85::encode(&out), text, "unpadded decode/encode round trip");
        }
    }
});
