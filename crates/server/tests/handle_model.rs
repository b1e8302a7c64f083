//! The handle tables of two sessions against a model: random opens,
//! reads and releases, each session naming its own handles and the
//! other's, under a small handle limit.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use larder_protocol::message::{Durability, Payload, Request as R, Response};
use larder_server::Limits;
use proptest::prelude::*;

const ROOT: u64 = 1;
const MAX_HANDLES: usize = 4;

#[derive(Clone, Debug)]
enum Step {
    /// Session `0` opens the file (1), the root directory (2) or a KV
    /// reader (3).
    Open(usize, u8),
    /// Session `0` releases the `1`-th handle of session `2`'s model (or a
    /// number nobody holds if there is none).
    Release(usize, usize, usize),
    /// Session `0` reads through the `1`-th handle of session `2`.
    Read(usize, usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..2usize, 1..4u8).prop_map(|(s, k)| Step::Open(s, k)),
        (0..2usize, 0..6usize, 0..2usize).prop_map(|(s, i, o)| Step::Release(s, i, o)),
        (0..2usize, 0..6usize, 0..2usize).prop_map(|(s, i, o)| Step::Read(s, i, o)),
    ]
}

/// A handle in the model: its number and what it is (1 file, 2 directory,
/// 3 reader).
type Held = BTreeSet<(u64, u8)>;

fn pick(held: &Held, i: usize) -> Option<(u64, u8)> {
    (!held.is_empty()).then(|| *held.iter().nth(i % held.len()).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn handles_follow_the_model(steps in proptest::collection::vec(step(), 1..60)) {
        let t = common::server_with(Limits { max_open_handles: MAX_HANDLES, ..Limits::default() });
        let sessions = [t.session(0, 0), t.session(0, 0)];
        let f = common::ino(t.run(&sessions[0], R::Mknod { parent: ROOT, name: b"f".to_vec(), mode: 0o644, rdev: 0 }));
        t.run(&sessions[0], R::CreateBucket { bucket: b"b".to_vec() });
        let put = R::KvPut { bucket: b"b".to_vec(), key: b"k".to_vec(), value: Payload::Inline(b"kv".to_vec()), durability: Durability::Buffered };
        t.run(&sessions[0], put);
        common::ino(t.run(&sessions[1], R::Lookup { parent: ROOT, name: b"f".to_vec() }));
        let mut model: [Held; 2] = [Held::new(), Held::new()];
        for step in steps {
            match step {
                Step::Open(s, kind) => {
                    let request = match kind {
                        1 => R::Open { ino: f, flags: libc::O_RDONLY },
                        2 => R::OpenDirectory { ino: ROOT },
                        _ => R::KvReaderOpen { bucket: b"b".to_vec(), key: b"k".to_vec() },
                    };
                    let response = t.run(&sessions[s], request);
                    if model[s].len() == MAX_HANDLES {
                        prop_assert_eq!(common::errno(response), libc::EMFILE);
                    } else {
                        let h = common::handle(response);
                        prop_assert!(model[s].iter().all(|&(held, _)| held != h), "handle {} handed out twice", h);
                        model[s].insert((h, kind));
                    }
                }
                Step::Release(s, i, owner) => {
                    let Some((h, kind)) = pick(&model[owner], i) else { continue };
                    let request = if kind == 2 { R::ReleaseDirectory { handle: h } } else { R::Release { handle: h } };
                    let response = t.run(&sessions[s], request);
                    // `Release` closes files and readers, `ReleaseDirectory`
                    // directories: what this session holds under the number
                    // decides, whoever's number it was.
                    let here = model[s].iter().find(|&&(held, _)| held == h).copied();
                    match here {
                        Some((_, k)) if (k == 2) == (kind == 2) => {
                            model[s].remove(&(h, k));
                            prop_assert_eq!(response, Response::Done);
                        }
                        _ => prop_assert_eq!(common::errno(response), libc::EBADF),
                    }
                }
                Step::Read(s, i, owner) => {
                    let Some((h, _)) = pick(&model[owner], i) else { continue };
                    let response = t.run(&sessions[s], R::Read { handle: h, offset: 0, length: 10 });
                    match model[s].iter().find(|&&(held, _)| held == h) {
                        Some((_, 1)) => prop_assert_eq!(response, Response::Data(Vec::new())),
                        Some((_, 3)) => prop_assert_eq!(response, Response::Data(b"kv".to_vec())),
                        _ => prop_assert_eq!(common::errno(response), libc::EBADF),
                    }
                }
            }
            for (session, held) in sessions.iter().zip(&model) {
                prop_assert_eq!(session.handle_count(), held.len());
            }
        }
        let [a, b] = sessions;
        a.close().unwrap();
        b.close().unwrap();
        prop_assert_eq!(t.server.clients(), 0);
        t.assert_fsck_clean();
    }
}
