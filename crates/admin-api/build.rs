//! The console (`web-admin/dist`) is embedded at build time: rebuild when it is built anew, or
//! when it first appears.

fn main() {
    let dist = std::path::Path::new("../../web-admin/dist");
    if dist.exists() {
        println!("cargo:rerun-if-changed=../../web-admin/dist");
    } else {
        // Its parent's entries change when `npm run build` makes it.
        println!("cargo:rerun-if-changed=../../web-admin");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
