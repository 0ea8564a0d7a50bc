//! zstd frames, shared by table blocks and blob values. Each thread keeps one compression and
//! one decompression context: making a context costs more than compressing a 4 KiB block.

use std::cell::RefCell;

/// The largest frame a block or blob record can be (one write carries at most
/// `MAX_WRITE_SIZE`, 3 GiB).
const MAX_FRAME: u64 = 4 << 30;

thread_local! {
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// Compresses `data` into one zstd frame that records its size, at `level`.
pub(crate) fn compress_zstd(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return zstd::bulk::compress(data, level);
        };
        match slot.as_mut() {
            Some((at, c)) if *at == level => c.compress(data),
            _ => {
                let (_, c) = slot.insert((level, zstd::bulk::Compressor::new(level)?));
                c.compress(data)
            }
        }
    })
}

/// Decompresses one zstd frame that records its size (blocks and blob values).
pub(crate) fn decompress_zstd(data: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let size = zstd::zstd_safe::get_frame_content_size(data)
        .map_err(|_| "zstd frame header is damaged".to_string())?
        .ok_or("zstd frame does not record its size")?;
    // Compared as u64: on a 32-bit target `4usize << 30` is 0 and would refuse every frame.
    if size > MAX_FRAME {
        return Err(format!("zstd frame claims {size} bytes"));
    }
    let size = usize::try_from(size)
        .map_err(|_| format!("zstd frame of {size} bytes does not fit in memory here"))?;
    DECOMPRESSOR
        .with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return zstd::bulk::decompress(data, size);
            };
            let d = match slot.as_mut() {
                Some(d) => d,
                None => slot.insert(zstd::bulk::Decompressor::new()?),
            };
            d.decompress(data, size)
        })
        .map_err(|e| format!("zstd: {e}"))
}

/// Decompresses one zstd frame into `out`, which must hold all of it; returns the bytes written.
/// For pieces whose length the caller knows (a blob value's chunks), so nothing is allocated.
pub(crate) fn decompress_zstd_into(data: &[u8], out: &mut [u8]) -> Result<usize, String> {
    DECOMPRESSOR
        .with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return zstd::bulk::Decompressor::new()?.decompress_to_buffer(data, out);
            };
            let d = match slot.as_mut() {
                Some(d) => d,
                None => slot.insert(zstd::bulk::Decompressor::new()?),
            };
            d.decompress_to_buffer(data, out)
        })
        .map_err(|e| format!("zstd: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_through_the_thread_contexts_at_any_level() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 7) as u8).collect();
        for level in [3, 1, 3, 19] {
            let frame = compress_zstd(&data, level).unwrap();
            assert!(frame.len() < data.len() / 4);
            assert_eq!(decompress_zstd(&frame).unwrap(), data);
            // The same bytes as a fresh context makes: the reused one keeps no state between
            // frames.
            assert_eq!(frame, zstd::bulk::compress(&data, level).unwrap());
        }
        assert!(decompress_zstd(b"not a frame").is_err());
    }
}
