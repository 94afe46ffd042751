//! Tests of the codec: frames round-trip and keep their layout, forged,
//! misdirected and oversized frames are refused, and the GOODBYE and the
//! view query are framed like every message.

use std::time::Duration;

use hmac::Mac;
use regent_core::ElectionName;

use super::control::{KIND_QUERY, KIND_VIEW};
use super::frame::{HEADER_LEN, TAG_LEN};
use super::messages::MAX_IDS;
use super::*;
use crate::algorithm::Algorithm;
use crate::epoch::{Epoch, Leader, NodeId};
use crate::ring::ElectionId;
use crate::{bully, ring};

fn secret() -> Secret {
    Secret::new(*b"0123456789abcdef").unwrap()
}

#[test]
fn a_frame_round_trips_and_its_layout_holds() {
    let env = Envelope {
        from: NodeId(7),
        to: NodeId(9),
        seq: 3,
        message: bully::Message::Coordinator {
            epoch: Epoch::new(2, 1).unwrap(),
        },
    };
    let frame = encode(&secret(), &env).unwrap();
    assert_eq!(frame.len(), 4 + HEADER_LEN + 8 + TAG_LEN);
    assert_eq!(
        frame_len(frame[..4].try_into().unwrap()),
        Ok(frame.len() - 4)
    );
    assert_eq!((frame[4], frame[5], frame[6]), (VERSION, 2, 3));
    assert_eq!(decode::<bully::Message>(&secret(), &frame), Ok(env));
}

#[test]
fn forged_and_misdirected_frames_are_refused() {
    let env = Envelope {
        from: NodeId(1),
        to: NodeId(2),
        seq: 0,
        message: ring::Message::Heartbeat {
            epoch: Epoch::new(1, 0).unwrap(),
        },
    };
    let frame = encode(&secret(), &env).unwrap();
    let other = Secret::new(*b"fedcba9876543210").unwrap();
    assert_eq!(
        decode::<ring::Message>(&other, &frame),
        Err(DecodeError::Unauthenticated)
    );
    let mut redirected = frame.clone();
    redirected[4 + 3 + 8 + 7] ^= 1;
    assert_eq!(
        decode::<ring::Message>(&secret(), &redirected),
        Err(DecodeError::Unauthenticated)
    );
    assert!(matches!(
        decode::<bully::Message>(&secret(), &frame),
        Err(DecodeError::Algorithm { .. })
    ));
    assert!(Secret::new(*b"short").is_err());
    assert_eq!(format!("{:?}", secret()), "Secret(..)");
}

#[test]
fn a_goodbye_is_framed_and_authenticated_like_a_message() {
    let goodbye = Envelope {
        from: NodeId(3),
        to: NodeId(1),
        seq: 1_700_000_000_000_000,
        message: Payload::<bully::Message>::Goodbye,
    };
    let frame = encode(&secret(), &goodbye).unwrap();
    assert_eq!(frame.len(), 4 + HEADER_LEN + TAG_LEN, "empty body");
    assert_eq!((frame[5], frame[6]), (2, GOODBYE_KIND));
    assert_eq!(decode(&secret(), &frame), Ok(goodbye.clone()));
    assert!(matches!(
        decode::<bully::Message>(&secret(), &frame),
        Err(DecodeError::Malformed { .. })
    ));
    assert!(matches!(
        decode::<Payload<ring::Message>>(&secret(), &frame),
        Err(DecodeError::Algorithm { .. })
    ));
    let other = Secret::new(*b"fedcba9876543210").unwrap();
    assert_eq!(
        decode::<Payload<bully::Message>>(&other, &frame),
        Err(DecodeError::Unauthenticated)
    );
    // A wrapped message keeps its kind byte and its body.
    let message = Envelope {
        message: Payload::Message(bully::Message::Heartbeat {
            epoch: Epoch::new(3, 2).unwrap(),
        }),
        ..goodbye
    };
    let frame = encode(&secret(), &message).unwrap();
    assert_eq!(frame[6], 4);
    assert_eq!(decode(&secret(), &frame), Ok(message));
}

fn view() -> PeerView {
    let mut view = PeerView::new(
        NodeId(2),
        ElectionName::new("billing").unwrap(),
        Algorithm::Bully,
    );
    view.quorum = true;
    view.members = 3;
    view.leader = Some(Leader {
        id: NodeId(2),
        epoch: Epoch::new(4, 1).unwrap(),
    });
    view.leading = Some(Epoch::new(4, 1).unwrap().token());
    view.lease_remaining = Some(Duration::from_micros(1_234_567));
    view
}

#[test]
fn a_query_and_its_view_round_trip_under_the_control_algorithm() {
    let query = Envelope {
        from: NodeId::ANY,
        to: NodeId::ANY,
        seq: 1_700_000_000_000_000,
        message: Control::Query {
            wait: Duration::from_millis(5_000),
        },
    };
    let frame = encode(&secret(), &query).unwrap();
    assert_eq!(frame.len(), 4 + HEADER_LEN + 4 + TAG_LEN);
    assert_eq!((frame[5], frame[6]), (CONTROL_ALGORITHM, KIND_QUERY));
    assert_eq!(algorithm_of(&frame), Some(CONTROL_ALGORITHM));
    assert_eq!(decode(&secret(), &frame), Ok(query));
    // No algorithm's decoder takes it, nor the transport's payload.
    assert!(matches!(
        decode::<Payload<bully::Message>>(&secret(), &frame),
        Err(DecodeError::Algorithm { .. })
    ));

    let answer = Envelope {
        from: NodeId(2),
        to: NodeId::ANY,
        seq: 1_700_000_000_000_001,
        message: Control::View {
            query_seq: 1_700_000_000_000_000,
            view: view(),
        },
    };
    let frame = encode(&secret(), &answer).unwrap();
    let body = 8 + 8 + 1 + 1 + 4 * 8 + 4 + 1 + "billing".len();
    assert_eq!(frame.len(), 4 + HEADER_LEN + body + TAG_LEN);
    assert_eq!(frame[6], KIND_VIEW);
    let at = 4 + HEADER_LEN + 16;
    assert_eq!((frame[at], frame[at + 1]), (0x82, 1 | 2 | 4));
    assert_eq!(decode(&secret(), &frame), Ok(answer.clone()));
    let other = Secret::new(*b"fedcba9876543210").unwrap();
    assert_eq!(
        decode::<Control>(&other, &frame),
        Err(DecodeError::Unauthenticated)
    );

    // A view with nothing set: every optional field is zero.
    let bare = Envelope {
        message: Control::View {
            query_seq: 7,
            view: PeerView::new(NodeId(1), ElectionName::new("p").unwrap(), Algorithm::Ring),
        },
        ..answer
    };
    let frame = encode(&secret(), &bare).unwrap();
    assert_eq!(frame[at + 1], 0);
    assert_eq!(decode(&secret(), &frame), Ok(bare));
}

/// Signs `body` as a VIEW (or `kind`) frame, as a peer with the secret
/// and a bug would.
fn signed(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    out.extend_from_slice(&[VERSION, CONTROL_ALGORITHM, kind]);
    out.extend_from_slice(&[0; 24]);
    out.extend_from_slice(body);
    let mut mac = secret().mac();
    mac.update(&out[4..]);
    out.extend_from_slice(&mac.finalize().into_bytes());
    let len = u32::try_from(out.len() - 4).unwrap();
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

#[test]
fn a_view_that_breaks_a_rule_is_malformed() {
    let good = {
        let mut out = Vec::new();
        Control::View {
            query_seq: 1,
            view: view(),
        }
        .encode_body(&mut out);
        out
    };
    assert!(decode::<Control>(&secret(), &signed(KIND_VIEW, &good)).is_ok());
    let malformed = |body: &[u8], what: &str| {
        assert_eq!(
            decode::<Control>(&secret(), &signed(KIND_VIEW, body)),
            Err(DecodeError::Malformed {
                what: match what {
                    "algorithm" => "unknown algorithm",
                    "flags" => "unknown view flags",
                    "field" => "a view field set without its flag",
                    "name" => "the election name is not a valid one",
                    "short" => "body ends early",
                    _ => "bytes after the body",
                }
            }),
            "{what}"
        );
    };
    let mut b = good.clone();
    b[16] = 4;
    malformed(&b, "algorithm");
    let mut b = good.clone();
    b[17] |= 16;
    malformed(&b, "flags");
    let mut b = good.clone();
    b[17] &= !4; // lease flag off, lease field still set
    malformed(&b, "field");
    let mut b = good.clone();
    let name_at = good.len() - "billing".len();
    b[name_at] = b'-';
    malformed(&b, "name");
    let mut b = good.clone();
    b[name_at - 1] = 0;
    b.truncate(name_at);
    malformed(&b, "name");
    malformed(&good[..good.len() - 1], "short");
    let mut b = good.clone();
    b.push(0);
    malformed(&b, "trailing");
    assert!(matches!(
        decode::<Control>(&secret(), &signed(3, &[])),
        Err(DecodeError::Malformed { .. })
    ));
    assert!(matches!(
        decode::<Control>(&secret(), &signed(KIND_QUERY, &[0, 0])),
        Err(DecodeError::Malformed { .. })
    ));
}

#[test]
fn an_oversized_prefix_is_refused_before_reading() {
    assert!(matches!(
        frame_len(u32::MAX.to_be_bytes()),
        Err(DecodeError::Oversized { .. })
    ));
    assert!(matches!(
        frame_len(10u32.to_be_bytes()),
        Err(DecodeError::Undersized { .. })
    ));
    let too_many = ring::Message::Election {
        initiator: NodeId(1),
        election: ElectionId {
            incarnation: 0,
            number: 0,
        },
        epoch: Epoch::ZERO,
        ids: vec![NodeId(1); MAX_IDS + 1],
        hop: 0,
    };
    let env = Envelope {
        from: NodeId(1),
        to: NodeId(2),
        seq: 0,
        message: too_many,
    };
    assert!(matches!(
        encode(&secret(), &env),
        Err(EncodeError::TooLarge { .. })
    ));
}
