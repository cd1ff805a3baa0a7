//! The codecs of compressed record batches: gzip, snappy (Kafka's xerial
//! framing, or a raw block), lz4 (the LZ4 frame format) and zstd, each in
//! pure Rust.
//!
//! [`decompress`] never makes more than `limit` bytes: a stream that would
//! is [`Failed::TooLarge`] before the bytes past the limit are made, so a
//! few hostile compressed bytes cannot make it allocate much more than the
//! limit.

use std::io::Read;

/// A batch's codec, from the low three bits of its attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Codec {
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// The codec of `attributes`: `Ok(None)` for an uncompressed batch,
    /// `Err` with the number for one Kafka does not define.
    pub(super) fn of(attributes: i16) -> Result<Option<Codec>, i16> {
        match attributes & 0x07 {
            0 => Ok(None),
            1 => Ok(Some(Codec::Gzip)),
            2 => Ok(Some(Codec::Snappy)),
            3 => Ok(Some(Codec::Lz4)),
            4 => Ok(Some(Codec::Zstd)),
            other => Err(other),
        }
    }

    /// Its name, as Kafka's `compression.type` spells it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

/// Why a compressed batch's records could not be had.
#[derive(Debug)]
pub(super) enum Failed {
    /// They would be more than the limit (in bytes).
    TooLarge(usize),
    /// The compressed bytes are broken; what the codec said.
    Broken(String),
}

/// The bytes `data` decompress to with `codec`, at most `limit` of them.
pub(super) fn decompress(codec: Codec, data: &[u8], limit: usize) -> Result<Vec<u8>, Failed> {
    match codec {
        Codec::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data), limit),
        Codec::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(data), limit),
        Codec::Snappy => snappy(data, limit),
        Codec::Zstd => zstd(data, limit),
    }
}

/// Everything `r` reads, failing once it passes `limit` bytes.
fn read_bounded(r: impl Read, limit: usize) -> Result<Vec<u8>, Failed> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    r.take(cap)
        .read_to_end(&mut out)
        .map_err(|e| Failed::Broken(e.to_string()))?;
    if out.len() > limit {
        return Err(Failed::TooLarge(limit));
    }
    Ok(out)
}

/// zstd: one frame after another until the bytes end.
fn zstd(data: &[u8], limit: usize) -> Result<Vec<u8>, Failed> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let decoder = ruzstd::decoding::StreamingDecoder::new(&mut rest)
            .map_err(|e| Failed::Broken(e.to_string()))?;
        let frame = read_bounded(decoder, limit - out.len())?;
        out.extend_from_slice(&frame);
    }
    Ok(out)
}

/// The header of Kafka's (xerial's) snappy framing: a magic, then version
/// and compatible version, both 1.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER: usize = 16;

/// snappy: xerial's framing (the header, then blocks each after its
/// big-endian length), or one raw block without it.
fn snappy(data: &[u8], limit: usize) -> Result<Vec<u8>, Failed> {
    let mut out = Vec::new();
    if !data.starts_with(XERIAL_MAGIC) || data.len() < XERIAL_HEADER {
        snappy_block(data, limit, &mut out)?;
        return Ok(out);
    }
    let mut rest = &data[XERIAL_HEADER..];
    while !rest.is_empty() {
        let Some((len, after)) = rest.split_first_chunk::<4>() else {
            return Err(Failed::Broken("a cut snappy block length".into()));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > after.len() {
            return Err(Failed::Broken(format!(
                "a snappy block of {len} bytes with {} left",
                after.len()
            )));
        }
        snappy_block(&after[..len], limit, &mut out)?;
        rest = &after[len..];
    }
    Ok(out)
}

/// One raw snappy block appended to `out`, checked against `limit` by its
/// stated length before anything is allocated.
fn snappy_block(block: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), Failed> {
    let broken = |e: snap::Error| Failed::Broken(e.to_string());
    let len = snap::raw::decompress_len(block).map_err(broken)?;
    if len > limit - out.len() {
        return Err(Failed::TooLarge(limit));
    }
    let start = out.len();
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(broken)?;
    out.truncate(start + n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn each_codec_round_trips_within_its_limit() {
        let text = b"the same few words, again and again, ".repeat(100);
        let lz4 = {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(&text).unwrap();
            e.finish().unwrap()
        };
        let raw_snappy = snap::raw::Encoder::new().compress_vec(&text).unwrap();
        let mut xerial = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        for half in text.chunks(text.len() / 2 + 1) {
            let block = snap::raw::Encoder::new().compress_vec(half).unwrap();
            xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        let zstd = ruzstd::encoding::compress_to_vec(
            &text[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let cases = [
            (Codec::Gzip, gzip(&text)),
            (Codec::Lz4, lz4),
            (Codec::Snappy, raw_snappy),
            (Codec::Snappy, xerial),
            (Codec::Zstd, zstd),
        ];
        for (codec, bytes) in cases {
            let out = decompress(codec, &bytes, text.len())
                .unwrap_or_else(|e| panic!("{}: {e:?}", codec.name()));
            assert_eq!(out, text, "{}", codec.name());
            match decompress(codec, &bytes, text.len() - 1) {
                Err(Failed::TooLarge(n)) => assert_eq!(n, text.len() - 1),
                other => panic!("{}: {other:?}", codec.name()),
            }
            assert!(
                matches!(
                    decompress(codec, &bytes[..bytes.len() / 2], usize::MAX / 2),
                    Err(Failed::Broken(_))
                ),
                "{}: a cut stream",
                codec.name()
            );
        }
    }

    /// A gzip bomb stops at the limit.
    #[test]
    fn a_bomb_stops_at_the_limit() {
        let bomb = gzip(&vec![0u8; 8 << 20]);
        assert!(bomb.len() < 64 << 10, "{}", bomb.len());
        assert!(matches!(
            decompress(Codec::Gzip, &bomb, 1 << 20),
            Err(Failed::TooLarge(_))
        ));
    }
}
