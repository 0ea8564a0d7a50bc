//! zstd frames, shared by table blocks and blob values.

/// The largest frame a block or blob value can be (values are at most 3 GiB).
const MAX_FRAME: u64 = 4 << 30;

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
    zstd::bulk::decompress(data, size).map_err(|e| format!("zstd: {e}"))
}
