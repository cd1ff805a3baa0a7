//! A request's frame on the wire: the request encoded with its header
//! ([`request_frame`]), and the checks a response frame passes before
//! anything decodes it ([`checked_layout`], [`bad_frame`]).

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{encode_request_header_into_buffer, Encodable, StrBytes};

use super::protocol_error;
use crate::codes;
use crate::frame_check;

/// Checks a response frame (header and body) before anything decodes it
/// (see [`frame_check`]) and returns the version its body is laid out in:
/// the one asked for, or 0 for a broker's UNSUPPORTED_VERSION answer to an
/// ApiVersions above its range, which Kafka writes as version 0.
pub(super) fn checked_layout(
    key: ApiKey,
    version: i16,
    header_version: i16,
    frame: &[u8],
) -> Result<i16, frame_check::FrameError> {
    let header_len = frame_check::check_response_header(header_version >= 1, frame)?;
    let body = &frame[header_len..];
    match frame_check::check_response(key as i16, version, body) {
        Ok(()) => Ok(version),
        Err(e) => {
            let unsupported = body.get(..2) == Some(&codes::UNSUPPORTED_VERSION.to_be_bytes()[..]);
            if key == ApiKey::ApiVersions
                && version > 0
                && unsupported
                && frame_check::check_response(key as i16, 0, body).is_ok()
            {
                Ok(0)
            } else {
                Err(e)
            }
        }
    }
}

/// Why a reply whose first four bytes are no Kafka frame size closed the
/// connection: a server that answers in another protocol (an HTTP server,
/// a TLS listener reached without TLS) is named as such.
pub(super) fn bad_frame(size: i32) -> String {
    let bytes = size.to_be_bytes();
    let other = |what: &str| {
        format!(
            "the server answered in another protocol than Kafka's ({what}): check that the \
             address is a Kafka listener (a reply frame size of {size} is not Kafka's)"
        )
    };
    if bytes.starts_with(b"HTTP") {
        other("its reply begins with \"HTTP\", an HTTP server")
    } else if bytes[0] == 0x15 && bytes[1] == 0x03 {
        other("a TLS alert: a TLS listener; set security.protocol to SSL or SASL_SSL")
    } else if bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        other(&format!(
            "its reply begins with the text {:?}",
            String::from_utf8_lossy(&bytes)
        ))
    } else {
        format!("bad response frame size {size}")
    }
}

/// One request's frame: its size, header and body, encoded for `version`.
pub(super) fn request_frame<Req: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    req: &Req,
) -> std::io::Result<BytesMut> {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(client_id.clone());
    let mut frame = BytesMut::with_capacity(128);
    frame.put_i32(0); // the size, filled in below
    encode_request_header_into_buffer(&mut frame, &header).map_err(protocol_error)?;
    req.encode(&mut frame, version).map_err(protocol_error)?;
    let size =
        i32::try_from(frame.len() - 4).map_err(|_| std::io::Error::other("request too large"))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame)
}
