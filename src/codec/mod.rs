//! Text codecs used by the Delta log.
pub mod z85;
