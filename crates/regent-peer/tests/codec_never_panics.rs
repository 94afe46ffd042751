//! Invariant: the decoder never panics, whatever the bytes, and accepts
//! only what was encoded with the shared secret, unchanged.
//!
//! Per seed: random messages of every algorithm round-trip, bare and as the
//! transport's payload (wrapped, or a GOODBYE); every mutation of a valid
//! frame (bit flips, truncation, extension, a rewritten length prefix) is
//! refused; random bytes, with and without a plausible prefix, are
//! refused; and random bodies carrying a *valid* tag (a peer that has the
//! secret and a bug), GOODBYE's kind among them, decode or are refused, but
//! never panic. The transport's view query (QUERY and VIEW, algorithm 0)
//! gets the same treatment.

use fastrand::Rng;
use hmac::{Hmac, KeyInit, Mac};
use std::time::Duration;

use regent_core::{ElectionName, FencingToken};
use regent_peer::codec::{
    self, CONTROL_ALGORITHM, Control, Envelope, GOODBYE_KIND, MAX_FRAME_LEN, Payload, PeerView,
    Secret, Wire,
};
use regent_peer::ring::ElectionId;
use regent_peer::sim::for_each_seed;
use regent_peer::{Algorithm, Epoch, Leader, NodeId, bully, lowest_id, ring};
use sha2::Sha256;

const KEY: &[u8; 20] = b"regent-peer-test-key";

fn epoch(rng: &mut Rng) -> Epoch {
    Epoch::from_raw(rng.u64(..))
}

fn random_lowest(rng: &mut Rng) -> lowest_id::Message {
    lowest_id::Message::Heartbeat {
        epoch: epoch(rng),
        leading: rng.bool(),
    }
}

fn random_bully(rng: &mut Rng) -> bully::Message {
    let epoch = epoch(rng);
    match rng.u8(0..5) {
        0 => bully::Message::Election { epoch },
        1 => bully::Message::Answer { epoch },
        2 => bully::Message::Coordinator { epoch },
        3 => bully::Message::Heartbeat { epoch },
        _ => bully::Message::Stale { epoch },
    }
}

fn random_ring(rng: &mut Rng) -> ring::Message {
    match rng.u8(0..5) {
        0 => ring::Message::Election {
            initiator: NodeId(rng.u64(..)),
            election: ElectionId {
                incarnation: rng.u64(..),
                number: rng.u64(..),
            },
            epoch: epoch(rng),
            ids: (0..rng.usize(0..20)).map(|_| NodeId(rng.u64(..))).collect(),
            hop: rng.u64(..),
        },
        1 => ring::Message::Coordinator {
            initiator: NodeId(rng.u64(..)),
            leader: NodeId(rng.u64(..)),
            epoch: epoch(rng),
            hop: rng.u64(..),
        },
        2 => ring::Message::Ack { hop: rng.u64(..) },
        3 => ring::Message::Heartbeat { epoch: epoch(rng) },
        _ => ring::Message::Stale { epoch: epoch(rng) },
    }
}

/// A random view query or answer.
fn random_control(rng: &mut Rng) -> Control {
    if rng.bool() {
        return Control::Query {
            wait: Duration::from_millis(u64::from(rng.u32(..))),
        };
    }
    let algorithm = [Algorithm::LowestId, Algorithm::Bully, Algorithm::Ring][rng.usize(..3)];
    let name: String = (0..rng.usize(1..=128))
        .map(|i| {
            let set: &[u8] = if i == 0 {
                b"abcXYZ019"
            } else {
                b"abcXYZ019._-"
            };
            char::from(set[rng.usize(..set.len())])
        })
        .collect();
    let mut view = PeerView::new(
        NodeId(rng.u64(..)),
        ElectionName::new(name).expect("valid name"),
        algorithm,
    );
    view.quorum = rng.bool();
    view.members = rng.u32(..);
    view.stopped = rng.bool();
    // Zero is absent on the wire: set fields are non-zero.
    if rng.bool() {
        view.leader = Some(Leader {
            id: NodeId(rng.u64(1..)),
            epoch: Epoch::from_raw(rng.u64(1..)),
        });
    }
    if rng.bool() {
        view.leading = Some(FencingToken::new(rng.u64(1..)));
    }
    if rng.bool() {
        view.lease_remaining = Some(Duration::from_micros(rng.u64(..)));
    }
    Control::View {
        query_seq: rng.u64(..),
        view,
    }
}

fn decodes_anything(secret: &Secret, bytes: &[u8]) -> bool {
    codec::decode::<lowest_id::Message>(secret, bytes).is_ok()
        || codec::decode::<bully::Message>(secret, bytes).is_ok()
        || codec::decode::<ring::Message>(secret, bytes).is_ok()
        || codec::decode::<Payload<lowest_id::Message>>(secret, bytes).is_ok()
        || codec::decode::<Payload<bully::Message>>(secret, bytes).is_ok()
        || codec::decode::<Payload<ring::Message>>(secret, bytes).is_ok()
        || codec::decode::<Control>(secret, bytes).is_ok()
}

/// The transport's payload: a wrapped message, or now and then a GOODBYE.
fn payload<M>(random: fn(&mut Rng) -> M) -> impl Fn(&mut Rng) -> Payload<M> {
    move |rng| {
        if rng.u8(0..4) == 0 {
            Payload::Goodbye
        } else {
            Payload::Message(random(rng))
        }
    }
}

fn mutate(rng: &mut Rng, frame: &[u8]) -> Vec<u8> {
    let mut m = frame.to_vec();
    match rng.u8(0..4) {
        0 => {
            for _ in 0..rng.usize(1..4) {
                let i = rng.usize(..m.len());
                m[i] ^= 1 << rng.u8(0..8);
            }
        }
        1 => m.truncate(rng.usize(..m.len())),
        2 => m.extend((0..rng.usize(1..16)).map(|_| rng.u8(..))),
        _ => {
            let len = rng.u32(..).to_be_bytes();
            m[..4].copy_from_slice(&len);
        }
    }
    m
}

fn check<M: Wire + Clone + PartialEq + std::fmt::Debug>(
    rng: &mut Rng,
    secret: &Secret,
    random: impl Fn(&mut Rng) -> M,
) {
    let envelope = Envelope {
        from: NodeId(rng.u64(..)),
        to: NodeId(rng.u64(..)),
        seq: rng.u64(..),
        message: random(rng),
    };
    let frame = codec::encode(secret, &envelope).expect("small messages encode");
    assert_eq!(codec::decode::<M>(secret, &frame), Ok(envelope));
    for _ in 0..8 {
        let m = mutate(rng, &frame);
        if m != frame {
            assert!(
                codec::decode::<M>(secret, &m).is_err(),
                "a mutated frame was accepted: {m:?}"
            );
        }
    }
}

/// A frame whose body is random but whose tag is valid.
fn signed_garbage(rng: &mut Rng) -> Vec<u8> {
    let kind = if rng.bool() {
        rng.u8(0..=6)
    } else {
        GOODBYE_KIND
    };
    let algorithm = if rng.u8(0..4) == 0 {
        CONTROL_ALGORITHM
    } else {
        rng.u8(1..=3)
    };
    let mut signed = vec![1, algorithm, kind];
    signed.extend((0..rng.usize(24..120)).map(|_| rng.u8(..)));
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(KEY).expect("any key length");
    mac.update(&signed);
    let tag = mac.finalize().into_bytes();
    let len = u32::try_from(signed.len() + tag.len()).expect("small");
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&signed);
    frame.extend_from_slice(&tag);
    frame
}

#[test]
fn arbitrary_bytes_never_panic_and_only_the_secret_authenticates() {
    let secret = Secret::new(*KEY).expect("long enough");
    for_each_seed("codec_never_panics", |seed| {
        let mut rng = Rng::with_seed(seed);
        for _ in 0..4 {
            check(&mut rng, &secret, random_lowest);
            check(&mut rng, &secret, random_bully);
            check(&mut rng, &secret, random_ring);
            check(&mut rng, &secret, payload(random_lowest));
            check(&mut rng, &secret, payload(random_bully));
            check(&mut rng, &secret, payload(random_ring));
            check(&mut rng, &secret, random_control);
        }
        for _ in 0..8 {
            let mut bytes: Vec<u8> = (0..rng.usize(0..200)).map(|_| rng.u8(..)).collect();
            assert!(!decodes_anything(&secret, &bytes));
            if bytes.len() >= 4 {
                let len = u32::try_from(bytes.len() - 4).expect("small");
                bytes[..4].copy_from_slice(&len.to_be_bytes());
                assert!(
                    !decodes_anything(&secret, &bytes),
                    "random bytes authenticated"
                );
            }
        }
        for _ in 0..8 {
            // May decode (the tag is valid) or not; must not panic.
            let _ = decodes_anything(&secret, &signed_garbage(&mut rng));
        }
        let huge = vec![0u8; MAX_FRAME_LEN + 5];
        assert!(!decodes_anything(&secret, &huge));
    });
}
