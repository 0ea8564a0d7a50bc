//! Several processes at once on one tree: a seeded script of rounds, each process taking one
//! step per round (open, write at an offset, append, truncate, fsync, read, close, mkdir, rename,
//! unlink, rmdir), with descriptors held across renames and unlinks of their files. The same
//! script runs on a plain directory; both must answer every step alike and hold the same tree.
//!
//! The steps of one round run at the same time, so they are chosen to commute: no two touch the
//! same path (or one above the other), nor the same file's contents. A write through a
//! descriptor does commute with a rename or unlink of its file's name, so those do race.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::{Mount, Node, snapshot, starting_processes};
use crate::ops::same_failure;

/// Where a worker runs its steps; set only for the processes the model test starts.
const ROOT_VAR: &str = "STRATA_MODEL_ROOT";
/// What starts a worker's answers on its standard output, which the test harness shares.
const REPLY: &str = "@@ ";
const PROCESSES: usize = 4;
const SLOTS: u32 = 4;
/// Rounds between two comparisons of the whole tree, taken while descriptors are still open.
const CHECK_EVERY: usize = 50;

#[test]
fn many_processes_agree_with_a_plain_directory() {
    let Some(m) = Mount::new() else { return };
    let seed: u64 = std::env::var("STRATA_MODEL_SEED").map_or(7, |s| s.parse().unwrap());
    let rounds: usize = std::env::var("STRATA_MODEL_ROUNDS").map_or(1500, |s| s.parse().unwrap());
    let script = Model::new(seed).script(rounds);
    let plain = tempfile::tempdir().unwrap();
    let want = run(plain.path(), &script);
    let got = run(m.path(), &script);
    for (i, round) in script.iter().enumerate() {
        for (p, step) in round.iter().enumerate() {
            let (a, b) = (&want.replies[i][p], &got.replies[i][p]);
            let agree = a == b
                || matches!(
                    (errno_of(a), errno_of(b)),
                    (Some(x), Some(y)) if same_failure(x, y)
                );
            assert!(
                agree,
                "seed {seed}, round {i}, process {p}: `{step}` answered {a:?} on a plain \
                 directory and {b:?} on the mount"
            );
        }
    }
    for (k, (a, b)) in want.trees.iter().zip(&got.trees).enumerate() {
        if a != b {
            panic!(
                "seed {seed}: the trees differ after round {}: {}",
                ((k + 1) * CHECK_EVERY).min(rounds),
                first_difference(a, b)
            );
        }
    }
    assert_eq!(want.trees.len(), got.trees.len());
}

fn errno_of(reply: &str) -> Option<i32> {
    reply.strip_prefix("err ").map(|n| n.parse().unwrap())
}

fn first_difference(a: &BTreeMap<PathBuf, Node>, b: &BTreeMap<PathBuf, Node>) -> String {
    let names = |t: &BTreeMap<PathBuf, Node>| t.keys().cloned().collect::<Vec<_>>();
    if names(a) != names(b) {
        return format!("names {:?} vs {:?}", names(a), names(b));
    }
    for (path, x) in a {
        let y = &b[path];
        if x != y {
            let describe = |n: &Node| match n {
                Node::File { perm, bytes } => format!("file {perm:o}, {} bytes", bytes.len()),
                other => format!("{other:?}"),
            };
            let at = match (x, y) {
                (Node::File { bytes: p, .. }, Node::File { bytes: q, .. }) => {
                    let i = p.iter().zip(q).position(|(u, v)| u != v);
                    format!(" (first differing byte {i:?})")
                }
                _ => String::new(),
            };
            return format!("{}: {} vs {}{at}", path.display(), describe(x), describe(y));
        }
    }
    unreachable!("equal trees")
}

/// What one run answered: each step's reply, by round and process, and the tree every
/// [`CHECK_EVERY`] rounds and at the end.
struct Transcript {
    replies: Vec<Vec<String>>,
    trees: Vec<BTreeMap<PathBuf, Node>>,
}

struct Worker {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Worker {
    fn start(root: &Path) -> Worker {
        let _starting = starting_processes();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "processes::worker",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROOT_VAR, root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Worker {
            child,
            input,
            output,
        }
    }

    fn send(&mut self, step: &str) {
        writeln!(self.input, "{step}").unwrap();
        self.input.flush().unwrap();
    }

    fn reply(&mut self) -> String {
        loop {
            let mut line = String::new();
            assert_ne!(
                self.output.read_line(&mut line).unwrap(),
                0,
                "a worker died"
            );
            // The harness may have begun the line ("test processes::worker ... ").
            if let Some((_, reply)) = line.trim_end().split_once(REPLY) {
                return reply.to_string();
            }
        }
    }

    /// Closes its input: the worker closes its descriptors and exits.
    fn finish(self) {
        let Worker {
            mut child, input, ..
        } = self;
        drop(input);
        assert!(child.wait().unwrap().success(), "a worker failed");
    }
}

fn run(root: &Path, script: &[Vec<String>]) -> Transcript {
    let mut workers: Vec<Worker> = (0..PROCESSES).map(|_| Worker::start(root)).collect();
    let mut replies = Vec::new();
    let mut trees = Vec::new();
    for (i, round) in script.iter().enumerate() {
        for (w, step) in workers.iter_mut().zip(round) {
            w.send(step);
        }
        let got: Vec<String> = workers.iter_mut().map(Worker::reply).collect();
        if std::env::var_os("STRATA_MODEL_TRACE").is_some() {
            eprintln!("{i}: {round:?} -> {got:?}");
        }
        replies.push(got);
        if (i + 1) % CHECK_EVERY == 0 && i + 1 < script.len() {
            trees.push(snapshot(root));
        }
    }
    for w in workers {
        w.finish();
    }
    trees.push(snapshot(root));
    Transcript { replies, trees }
}

#[test]
#[ignore = "one of the processes many_processes_agree_with_a_plain_directory starts"]
fn worker() {
    let Some(root) = std::env::var_os(ROOT_VAR).map(PathBuf::from) else {
        // Not a test of its own: run with `--ignored` outside the model test, it does nothing.
        eprintln!("{ROOT_VAR} is not set: this runs only as a process of the model test");
        return;
    };
    let mut handles: HashMap<u32, File> = HashMap::new();
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let reply = match perform(&root, &mut handles, &line) {
            Ok(Some(bytes)) => format!("data {} {:016x}", bytes.len(), fnv(&bytes)),
            Ok(None) => "ok".to_string(),
            Err(e) => format!("err {}", e.raw_os_error().unwrap_or(-1)),
        };
        writeln!(out, "{REPLY}{reply}").unwrap();
        out.flush().unwrap();
    }
}

/// Runs one step of the script; `Some` holds what it read.
fn perform(
    root: &Path,
    handles: &mut HashMap<u32, File>,
    step: &str,
) -> std::io::Result<Option<Vec<u8>>> {
    let w: Vec<&str> = step.split(' ').collect();
    let num = |i: usize| -> u64 { w[i].parse().unwrap() };
    let slot = || -> u32 { w[1].parse().unwrap() };
    let path = |i: usize| root.join(w[i]);
    let none = |r: std::io::Result<()>| r.map(|()| None);
    match w[0] {
        "open" => {
            let flags = w[3];
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(flags.contains('c'))
                .append(flags.contains('a'))
                .truncate(flags.contains('t'))
                .custom_flags(if flags.contains('d') {
                    libc::O_DSYNC
                } else {
                    0
                })
                .open(path(2))?;
            handles.insert(slot(), f);
            Ok(None)
        }
        _ if w.len() > 1
            && w[0] != "open"
            && w[1].parse::<u32>().is_ok()
            && !handles.contains_key(&slot()) =>
        {
            Err(std::io::Error::from_raw_os_error(libc::EBADF))
        }
        "pwrite" => none(handles[&slot()].write_all_at(&pattern(num(3) as usize, num(4)), num(2))),
        "write" => none((&handles[&slot()]).write_all(&pattern(num(2) as usize, num(3)))),
        "ftrunc" => none(handles[&slot()].set_len(num(2))),
        "fsync" => none(handles[&slot()].sync_all()),
        "readh" => {
            let (f, mut bytes, mut at) = (&handles[&slot()], Vec::new(), 0u64);
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let n = f.read_at(&mut buf, at)?;
                if n == 0 {
                    return Ok(Some(bytes));
                }
                bytes.extend_from_slice(&buf[..n]);
                at += n as u64;
            }
        }
        "close" => {
            handles.remove(&slot());
            Ok(None)
        }
        "mkdir" => none(std::fs::create_dir(path(1))),
        "rename" => none(std::fs::rename(path(1), path(2))),
        "unlink" => none(std::fs::remove_file(path(1))),
        "rmdir" => none(std::fs::remove_dir(path(1))),
        "trunc" => none(
            OpenOptions::new()
                .write(true)
                .open(path(1))?
                .set_len(num(2)),
        ),
        "read" => std::fs::read(path(1)).map(Some),
        "nop" => Ok(None),
        other => panic!("unknown step {other}"),
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize).wrapping_add(i.wrapping_mul(131)) as u8 | 1)
        .collect()
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The tree as the script left it so far: what each name is, and which file each process's
/// descriptors hold. Files are numbered; their contents are the plain directory's business.
struct Model {
    rng: StdRng,
    /// Path to (file number, is a directory).
    tree: BTreeMap<String, (u64, bool)>,
    handles: Vec<BTreeMap<u32, u64>>,
    names: u64,
}

/// What the steps already chosen for a round touch.
#[derive(Default)]
struct Taken {
    paths: Vec<String>,
    files: HashSet<u64>,
}

impl Taken {
    fn free(&self, paths: &[String], files: &[u64]) -> bool {
        let related = |a: &str, b: &str| {
            a == b
                || a.strip_prefix(b).is_some_and(|r| r.starts_with('/'))
                || b.strip_prefix(a).is_some_and(|r| r.starts_with('/'))
        };
        paths
            .iter()
            .all(|p| self.paths.iter().all(|q| !related(p, q)))
            && files.iter().all(|f| !self.files.contains(f))
    }
}

/// A step, what it touches, and how it changes the model.
struct Plan {
    step: String,
    paths: Vec<String>,
    files: Vec<u64>,
    effect: Effect,
}

enum Effect {
    None,
    Open { slot: u32, path: String },
    Close(u32),
    Mkdir(String),
    Move(String, String),
    Remove(String),
}

impl Model {
    fn new(seed: u64) -> Model {
        let mut m = Model {
            rng: StdRng::seed_from_u64(seed),
            tree: BTreeMap::new(),
            handles: vec![BTreeMap::new(); PROCESSES],
            names: 0,
        };
        for d in ["a", "b"] {
            m.tree.insert(d.to_string(), (0, true));
        }
        m
    }

    fn script(mut self, rounds: usize) -> Vec<Vec<String>> {
        let mut script = vec![vec!["mkdir a".to_string(), "mkdir b".to_string()]];
        script[0].resize(PROCESSES, "nop".to_string());
        for _ in 1..rounds {
            let mut taken = Taken::default();
            let round = (0..PROCESSES)
                .map(|p| {
                    for _ in 0..10 {
                        if let Some(plan) = self.plan(p)
                            && taken.free(&plan.paths, &plan.files)
                        {
                            taken.paths.extend(plan.paths);
                            taken.files.extend(plan.files);
                            self.apply(p, plan.effect);
                            return plan.step;
                        }
                    }
                    "nop".to_string()
                })
                .collect();
            script.push(round);
        }
        script
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.names += 1;
        let dirs: Vec<&String> = self
            .tree
            .iter()
            .filter(|(_, v)| v.1)
            .map(|(k, _)| k)
            .collect();
        let parent = dirs[self.rng.random_range(0..dirs.len())].clone();
        format!("{parent}/{prefix}{}", self.names)
    }

    fn pick(&mut self, dirs: bool) -> Option<String> {
        let all: Vec<&String> = self
            .tree
            .iter()
            .filter(|(_, v)| v.1 == dirs)
            .map(|(k, _)| k)
            .collect();
        (!all.is_empty()).then(|| all[self.rng.random_range(0..all.len())].clone())
    }

    fn length(&mut self) -> u64 {
        match self.rng.random_range(0..20) {
            0..14 => self.rng.random_range(1..4096),
            14..19 => self.rng.random_range(4096..300_000),
            _ => self.rng.random_range(1..2 << 20),
        }
    }

    fn offset(&mut self) -> u64 {
        match self.rng.random_range(0..20) {
            0..14 => self.rng.random_range(0..65_536),
            14..19 => self.rng.random_range(0..1 << 20),
            _ => self.rng.random_range(0..6 << 20),
        }
    }

    fn plan(&mut self, p: usize) -> Option<Plan> {
        let held: Vec<(u32, u64)> = self.handles[p].iter().map(|(s, f)| (*s, *f)).collect();
        let on_handle = |step: String, file: u64, effect| {
            Some(Plan {
                step,
                paths: vec![],
                files: vec![file],
                effect,
            })
        };
        let roll = self.rng.random_range(0..100);
        if roll < 45 && !held.is_empty() {
            let (slot, file) = held[self.rng.random_range(0..held.len())];
            let seed: u64 = self.rng.random_range(0..1 << 30);
            return match roll {
                0..15 => {
                    let (off, len) = (self.offset(), self.length());
                    on_handle(
                        format!("pwrite {slot} {off} {len} {seed}"),
                        file,
                        Effect::None,
                    )
                }
                15..25 => {
                    let len = self.length();
                    on_handle(format!("write {slot} {len} {seed}"), file, Effect::None)
                }
                25..29 => {
                    let len = self.offset();
                    on_handle(format!("ftrunc {slot} {len}"), file, Effect::None)
                }
                29..32 => on_handle(format!("fsync {slot}"), file, Effect::None),
                32..38 => on_handle(format!("readh {slot}"), file, Effect::None),
                _ => on_handle(format!("close {slot}"), file, Effect::Close(slot)),
            };
        }
        match roll {
            0..65 => {
                let slot = (0..SLOTS).find(|s| !self.handles[p].contains_key(s))?;
                let existing = self.rng.random_bool(0.6);
                let path = if existing {
                    self.pick(false)?
                } else {
                    self.fresh("f")
                };
                let mut flags = String::from("c");
                // Truncating and appending at once is refused by std's OpenOptions.
                for (flag, odds) in [('a', 0.3), ('t', 0.1), ('d', 0.1)] {
                    if self.rng.random_bool(odds) && !(flag == 't' && flags.contains('a')) {
                        flags.push(flag);
                    }
                }
                let files = self.tree.get(&path).map(|v| v.0).into_iter().collect();
                Some(Plan {
                    step: format!("open {slot} {path} {flags}"),
                    paths: vec![path.clone()],
                    files,
                    effect: Effect::Open { slot, path },
                })
            }
            65..70 => {
                let path = self.fresh("d");
                (path.matches('/').count() < 4).then(|| Plan {
                    step: format!("mkdir {path}"),
                    paths: vec![path.clone()],
                    files: vec![],
                    effect: Effect::Mkdir(path),
                })
            }
            70..82 => {
                let dir = self.rng.random_bool(0.2);
                let from = self.pick(dir)?;
                let to = if !dir && self.rng.random_bool(0.4) {
                    self.pick(false)?
                } else {
                    self.fresh(if dir { "d" } else { "f" })
                };
                let inside = to.strip_prefix(&from).is_some_and(|r| r.starts_with('/'));
                (from != to && !inside && to.matches('/').count() < 5).then(|| Plan {
                    step: format!("rename {from} {to}"),
                    paths: vec![from.clone(), to.clone()],
                    files: vec![],
                    effect: Effect::Move(from, to),
                })
            }
            82..88 => {
                let path = self.pick(false)?;
                Some(Plan {
                    step: format!("unlink {path}"),
                    paths: vec![path.clone()],
                    files: vec![],
                    effect: Effect::Remove(path),
                })
            }
            88..91 => {
                // `a` and `b` stay: new names need a directory to go in.
                let path = self.pick(true).filter(|p| p != "a" && p != "b")?;
                let empty = !self.tree.keys().any(|k| k.starts_with(&format!("{path}/")));
                Some(Plan {
                    step: format!("rmdir {path}"),
                    paths: vec![path.clone()],
                    files: vec![],
                    effect: if empty {
                        Effect::Remove(path)
                    } else {
                        Effect::None
                    },
                })
            }
            91..95 => {
                let path = self.pick(false)?;
                let len = self.offset();
                Some(Plan {
                    step: format!("trunc {path} {len}"),
                    files: vec![self.tree[&path].0],
                    paths: vec![path],
                    effect: Effect::None,
                })
            }
            _ => {
                let path = self.pick(false)?;
                Some(Plan {
                    step: format!("read {path}"),
                    files: vec![self.tree[&path].0],
                    paths: vec![path],
                    effect: Effect::None,
                })
            }
        }
    }

    fn apply(&mut self, p: usize, effect: Effect) {
        match effect {
            Effect::None => {}
            Effect::Open { slot, path } => {
                let file = match self.tree.get(&path) {
                    Some(v) => v.0,
                    None => {
                        self.names += 1;
                        self.tree.insert(path, (self.names, false));
                        self.names
                    }
                };
                self.handles[p].insert(slot, file);
            }
            Effect::Close(slot) => {
                self.handles[p].remove(&slot);
            }
            Effect::Mkdir(path) => {
                self.tree.insert(path, (0, true));
            }
            Effect::Move(from, to) => {
                let moved: Vec<String> = self
                    .tree
                    .keys()
                    .filter(|k| *k == &from || k.starts_with(&format!("{from}/")))
                    .cloned()
                    .collect();
                for k in moved {
                    let v = self.tree.remove(&k).unwrap();
                    self.tree.insert(format!("{to}{}", &k[from.len()..]), v);
                }
            }
            Effect::Remove(path) => {
                self.tree.remove(&path);
            }
        }
    }
}
