//! Invariant: quorum mode's frames decode without panicking, whatever the
//! bytes, and only as what was encoded with the shared secret, unchanged.
//!
//! Per seed: random quorum-mode messages (each algorithm's messages
//! wrapped, ASK, GRANT) round-trip; every mutation of a valid frame is
//! refused; a quorum-mode frame is refused as a plain algorithm's and the
//! other way round; random bodies under a *valid* tag and a quorum-mode
//! algorithm byte (a peer that has the secret and a bug) decode or are
//! refused, but never panic. A GRANT whose lease is over the maximum
//! duration is refused.

use std::time::Duration;

use fastrand::Rng;
use hmac::{Hmac, KeyInit, Mac};
use regent_peer::codec::{self, DecodeError, Envelope, Secret, Wire};
use regent_peer::quorum::{AskId, Message};
use regent_peer::sim::for_each_seed;
use regent_peer::{Epoch, MAX_DURATION, NodeId, bully, lowest_id, ring};
use sha2::Sha256;

const KEY: &[u8; 20] = b"regent-peer-test-key";

fn epoch(rng: &mut Rng) -> Epoch {
    Epoch::from_raw(rng.u64(..))
}

fn ask_id(rng: &mut Rng) -> AskId {
    AskId {
        incarnation: rng.u64(..),
        number: rng.u64(..),
    }
}

/// A random quorum-mode message around `inner`.
fn wrap<M>(rng: &mut Rng, inner: M) -> Message<M> {
    match rng.u8(0..3) {
        0 => Message::Inner(inner),
        1 => Message::Ask {
            epoch: epoch(rng),
            id: ask_id(rng),
        },
        _ => Message::Grant {
            epoch: epoch(rng),
            id: ask_id(rng),
            lease: Duration::from_nanos(rng.u64(..=86_400_000_000_000)),
        },
    }
}

fn random_lowest(rng: &mut Rng) -> Message<lowest_id::Message> {
    let inner = lowest_id::Message::Heartbeat {
        epoch: epoch(rng),
        leading: rng.bool(),
    };
    wrap(rng, inner)
}

fn random_bully(rng: &mut Rng) -> Message<bully::Message> {
    let inner = bully::Message::Coordinator { epoch: epoch(rng) };
    wrap(rng, inner)
}

fn random_ring(rng: &mut Rng) -> Message<ring::Message> {
    let inner = ring::Message::Coordinator {
        initiator: NodeId(rng.u64(..)),
        leader: NodeId(rng.u64(..)),
        epoch: epoch(rng),
        hop: rng.u64(..),
    };
    wrap(rng, inner)
}

fn decodes_anything(secret: &Secret, bytes: &[u8]) -> bool {
    codec::decode::<Message<lowest_id::Message>>(secret, bytes).is_ok()
        || codec::decode::<Message<bully::Message>>(secret, bytes).is_ok()
        || codec::decode::<Message<ring::Message>>(secret, bytes).is_ok()
}

fn mutate(rng: &mut Rng, frame: &[u8]) -> Vec<u8> {
    let mut m = frame.to_vec();
    match rng.u8(0..3) {
        0 => {
            let i = rng.usize(..m.len());
            m[i] ^= 1 << rng.u8(0..8);
        }
        1 => m.truncate(rng.usize(..m.len())),
        _ => m.extend((0..rng.usize(1..16)).map(|_| rng.u8(..))),
    }
    m
}

fn check<M: Wire + Clone + PartialEq + std::fmt::Debug, P: Wire + std::fmt::Debug>(
    rng: &mut Rng,
    secret: &Secret,
    random: fn(&mut Rng) -> M,
) {
    let envelope = Envelope {
        from: NodeId(rng.u64(..)),
        to: NodeId(rng.u64(..)),
        seq: rng.u64(..),
        message: random(rng),
    };
    let frame = codec::encode(secret, &envelope).expect("small messages encode");
    assert_eq!(codec::decode::<M>(secret, &frame), Ok(envelope));
    assert!(
        matches!(
            codec::decode::<P>(secret, &frame),
            Err(DecodeError::Algorithm { .. })
        ),
        "a quorum-mode frame read as the plain algorithm's"
    );
    for _ in 0..4 {
        let m = mutate(rng, &frame);
        if m != frame {
            assert!(codec::decode::<M>(secret, &m).is_err(), "mutated: {m:?}");
        }
    }
}

/// A frame with a valid tag: the header with `algorithm` and `kind`,
/// zero addresses and counter, and `body`.
fn signed(algorithm: u8, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut signed = vec![1, algorithm, kind];
    signed.extend_from_slice(&[0; 24]);
    signed.extend_from_slice(body);
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(KEY).expect("any key length");
    mac.update(&signed);
    let tag = mac.finalize().into_bytes();
    let len = u32::try_from(signed.len() + tag.len()).expect("small");
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&signed);
    frame.extend_from_slice(&tag);
    frame
}

/// A GRANT body with `lease_nanos`.
fn grant_body(lease_nanos: u64) -> Vec<u8> {
    [7u64, 1, 2, lease_nanos]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect()
}

#[test]
fn arbitrary_bytes_never_panic_and_only_the_secret_authenticates() {
    let secret = Secret::new(*KEY).expect("long enough");
    for_each_seed("quorum_codec_never_panics", |seed| {
        let mut rng = Rng::with_seed(seed);
        for _ in 0..4 {
            check::<_, lowest_id::Message>(&mut rng, &secret, random_lowest);
            check::<_, bully::Message>(&mut rng, &secret, random_bully);
            check::<_, ring::Message>(&mut rng, &secret, random_ring);
        }
        // A plain frame is not a quorum-mode one.
        let plain = Envelope {
            from: NodeId(1),
            to: NodeId(2),
            seq: 0,
            message: bully::Message::Heartbeat {
                epoch: epoch(&mut rng),
            },
        };
        let frame = codec::encode(&secret, &plain).expect("encodes");
        assert!(matches!(
            codec::decode::<Message<bully::Message>>(&secret, &frame),
            Err(DecodeError::Algorithm { .. })
        ));
        for _ in 0..8 {
            let kind = match rng.u8(0..3) {
                0 => 0x81,
                1 => 0x82,
                _ => rng.u8(..),
            };
            let body: Vec<u8> = (0..rng.usize(0..40)).map(|_| rng.u8(..)).collect();
            // May decode (the tag is valid) or not; must not panic.
            let _ = decodes_anything(&secret, &signed(0x80 | rng.u8(1..=3), kind, &body));
        }
    });
}

#[test]
fn a_grant_longer_than_the_maximum_duration_is_refused() {
    let secret = Secret::new(*KEY).expect("long enough");
    let max = u64::try_from(MAX_DURATION.as_nanos()).expect("a day fits");
    let longest = signed(0x82, 0x82, &grant_body(max));
    assert!(matches!(
        codec::decode::<Message<bully::Message>>(&secret, &longest),
        Ok(Envelope {
            message: Message::Grant { lease, .. },
            ..
        }) if lease == MAX_DURATION
    ));
    let over = signed(0x82, 0x82, &grant_body(max + 1));
    assert!(matches!(
        codec::decode::<Message<bully::Message>>(&secret, &over),
        Err(DecodeError::Malformed { .. })
    ));
}
