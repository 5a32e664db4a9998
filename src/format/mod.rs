//! Deletion vector bytes: bitmaps, DV files and descriptors. No I/O here:
//! everything takes `&[u8]` / `Write` and returns values.
pub mod bitmap;
pub mod descriptor;
pub mod file;
pub mod rows;
