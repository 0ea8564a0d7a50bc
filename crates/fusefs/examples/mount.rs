//! Mounts a store, writes through both faces, and unmounts:
//! `cargo run -p strata-fusefs --example mount -- STORE_DIR MOUNT_DIR`.

use std::sync::Arc;

use strata_engine::{Db, Options};
use strata_fusefs::{FsConfig, MountConfig, StrataFs};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(store), Some(mnt)) = (args.next(), args.next()) else {
        return Err("usage: mount STORE_DIR MOUNT_DIR".into());
    };
    let mut opts = Options::default();
    strata_fusefs::prepare_options(&mut opts, "default");
    let db = Arc::new(Db::open(&store, opts)?);
    let fs = StrataFs::new(db.clone(), FsConfig::default())?;
    let mounted = strata_fusefs::spawn(fs, mnt.as_ref(), &MountConfig::default())?;

    // A key written through the engine is a file...
    db.put("users/alice.json", r#"{"name": "alice"}"#)?;
    let path = std::path::Path::new(&mnt).join("users/alice.json");
    println!(
        "{} holds {}",
        path.display(),
        std::fs::read_to_string(&path)?
    );
    // ...and a file written through the mount is a key.
    std::fs::write(std::path::Path::new(&mnt).join("users/bob.json"), b"{}")?;
    let bob = db.get("users/bob.json")?.map(|v| v.to_vec());
    println!("key users/bob.json holds {:?}", bob.map(String::from_utf8));

    mounted.unmount()?;
    db.close()?;
    Ok(())
}
