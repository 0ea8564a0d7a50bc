//! The stores open in this instance, by path. One path is never opened twice (two `Db`s on one
//! directory would each append to the WAL and the manifest), so `wasi:keyvalue` shares the store
//! that `strata:kv` opened, or opens it itself when nobody has.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use strata_engine::Db;

thread_local! {
    static OPEN: RefCell<HashMap<String, Weak<Db>>> = RefCell::new(HashMap::new());
}

pub(crate) fn is_open(path: &str) -> bool {
    find(path).is_some()
}

/// The live store at `path`, if one is open.
pub(crate) fn find(path: &str) -> Option<Rc<Db>> {
    OPEN.with(|open| open.borrow().get(path).and_then(Weak::upgrade))
}

pub(crate) fn register(path: &str, db: &Rc<Db>) {
    OPEN.with(|open| {
        let mut open = open.borrow_mut();
        open.retain(|_, w| w.strong_count() > 0);
        open.insert(path.to_string(), Rc::downgrade(db));
    });
}
