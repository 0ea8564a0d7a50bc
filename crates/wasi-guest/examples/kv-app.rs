//! `kv-app`: a small command-line component over `wasi:keyvalue` 0.2.0-draft, the standard
//! interface, and nothing else: it does not use this crate and knows nothing of Strata. Plugged
//! into the Strata component with `wac plug`, its keys land in a Strata store that every other
//! face (the mount, REST, the CLI) sees; plugged into another `wasi:keyvalue` provider it runs
//! unchanged.
//!
//! ```text
//! cargo build --release --target wasm32-wasip2 --lib --example kv-app
//! wac plug target/wasm32-wasip2/release/examples/kv-app.wasm \
//!     --plug target/wasm32-wasip2/release/strata_wasi_guest.wasm -o kv-app.wasm
//! wasmtime run --dir ./data::/store kv-app.wasm incr visits
//! ```
//!
//! ```text
//! kv-app [--bucket NAME] set KEY VALUE | get KEY | delete KEY | exists KEY
//!                        incr KEY [DELTA] | list | set-many KEY=VALUE... | get-many KEY...
//! ```

use std::process::ExitCode;

use wasi::keyvalue::{atomics, batch, store};

wit_bindgen::generate!({
    path: "../../wit/deps/keyvalue",
    world: "wasi:keyvalue/imports",
});

const USAGE: &str = "usage: kv-app [--bucket NAME] COMMAND
  set KEY VALUE          store VALUE (its UTF-8 bytes) under KEY
  get KEY                print KEY's value; exit 1 if there is none
  delete KEY             remove KEY
  exists KEY             print true or false
  incr KEY [DELTA]       add DELTA (default 1) to KEY's counter and print it
  list                   print every key of the bucket, page by page
  set-many KEY=VALUE...  store several keys in one atomic batch
  get-many KEY...        print KEY=VALUE for each key that has a value";

/// A failure to report: bad arguments (with the usage) or what the store answered.
enum Failure {
    Usage(String),
    Store(store::Error),
    NotFound(String),
}

impl From<store::Error> for Failure {
    fn from(e: store::Error) -> Self {
        Failure::Store(e)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(why)) => {
            eprintln!("kv-app: {why}\n{USAGE}");
            ExitCode::FAILURE
        }
        Err(Failure::Store(e)) => {
            eprintln!("kv-app: {}", describe(&e));
            ExitCode::FAILURE
        }
        Err(Failure::NotFound(key)) => {
            eprintln!("kv-app: no value for {key:?}");
            ExitCode::FAILURE
        }
    }
}

fn describe(e: &store::Error) -> String {
    match e {
        store::Error::NoSuchStore => "no such bucket".into(),
        store::Error::AccessDenied => "access denied".into(),
        store::Error::Other(text) => text.clone(),
    }
}

fn run(args: &[String]) -> Result<(), Failure> {
    let (bucket_name, rest) = match args {
        [flag, name, rest @ ..] if flag == "--bucket" => (name.as_str(), rest),
        _ => ("default", args),
    };
    let Some((command, operands)) = rest.split_first() else {
        return Err(Failure::Usage("no command".into()));
    };
    let bucket = store::open(bucket_name)?;
    match (command.as_str(), operands) {
        ("set", [key, value]) => bucket.set(key, value.as_bytes())?,
        ("get", [key]) => match bucket.get(key)? {
            Some(value) => println!("{}", String::from_utf8_lossy(&value)),
            None => return Err(Failure::NotFound(key.clone())),
        },
        ("delete", [key]) => bucket.delete(key)?,
        ("exists", [key]) => println!("{}", bucket.exists(key)?),
        ("incr", [key]) => println!("{}", atomics::increment(&bucket, key, 1)?),
        ("incr", [key, delta]) => {
            let delta: u64 = delta
                .parse()
                .map_err(|_| Failure::Usage(format!("DELTA must be a whole number: {delta:?}")))?;
            println!("{}", atomics::increment(&bucket, key, delta)?);
        }
        ("list", []) => {
            let mut cursor = None;
            loop {
                let page = bucket.list_keys(cursor)?;
                for key in &page.keys {
                    println!("{key}");
                }
                match page.cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
        }
        ("set-many", pairs) if !pairs.is_empty() => {
            let entries = pairs
                .iter()
                .map(|pair| match pair.split_once('=') {
                    Some((key, value)) => Ok((key.to_string(), value.as_bytes().to_vec())),
                    None => Err(Failure::Usage(format!("expected KEY=VALUE, got {pair:?}"))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            batch::set_many(&bucket, &entries)?;
        }
        ("get-many", keys) if !keys.is_empty() => {
            for (key, value) in batch::get_many(&bucket, keys)?.into_iter().flatten() {
                println!("{key}={}", String::from_utf8_lossy(&value));
            }
        }
        (command, _) => {
            return Err(Failure::Usage(format!(
                "unknown command or wrong operands: {command}"
            )));
        }
    }
    Ok(())
}
