//! zstd frames, shared by table blocks and blob values.

/// Decompresses one zstd frame that records its size (blocks and blob values).
pub(crate) fn decompress_zstd(data: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let size = zstd::zstd_safe::get_frame_content_size(data)
        .map_err(|_| "zstd frame header is damaged".to_string())?
        .ok_or("zstd frame does not record its size")?;
    let size = usize::try_from(size).map_err(|_| "zstd frame size is impossible")?;
    if size > (4usize << 30) {
        return Err(format!("zstd frame claims {size} bytes"));
    }
    zstd::bulk::decompress(data, size).map_err(|e| format!("zstd: {e}"))
}
