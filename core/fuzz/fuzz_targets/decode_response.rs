//! A response frame body of every (API, version) the Kafka client sends:
//! the first two input bytes choose the pair among those the frame check
//! covers, the rest is the body. Whatever the bytes, the frame check never
//! panics, and a body it accepts decodes with kafka-protocol without a
//! panic and without an allocation beyond what libFuzzer's
//! `-malloc_limit_mb` allows (ci/fuzz.sh sets it): a count the check let
//! through is bounded by the bytes left. A Fetch answer's record batches
//! also go through `krabka_kafka::records::read_batches`.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use krabka_kafka::frame_check::{check_response, covered};
use krabka_kafka::records::read_batches;
use libfuzzer_sys::fuzz_target;

fn decode<T: Decodable>(body: &[u8], version: i16) {
    // The result does not matter (a checked body may still hold bad UTF-8,
    // say); that decoding returns at all, within the allocation limit, does.
    let _ = T::decode(&mut Bytes::copy_from_slice(body), version);
}

fuzz_target!(|data: &[u8]| {
    let pairs: Vec<(i16, i16)> = covered().collect();
    let (pick, body) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_be_bytes([*a, *b])), rest),
        _ => return,
    };
    let (api, version) = pairs[pick % pairs.len()];
    if check_response(api, version, body).is_err() {
        return;
    }
    match ApiKey::try_from(api).expect("a covered key is a known API") {
        ApiKey::ApiVersions => decode::<ApiVersionsResponse>(body, version),
        ApiKey::SaslHandshake => decode::<SaslHandshakeResponse>(body, version),
        ApiKey::SaslAuthenticate => decode::<SaslAuthenticateResponse>(body, version),
        ApiKey::FindCoordinator => decode::<FindCoordinatorResponse>(body, version),
        ApiKey::DescribeTransactions => decode::<DescribeTransactionsResponse>(body, version),
        ApiKey::DescribeProducers => decode::<DescribeProducersResponse>(body, version),
        ApiKey::InitProducerId => decode::<InitProducerIdResponse>(body, version),
        ApiKey::AddPartitionsToTxn => decode::<AddPartitionsToTxnResponse>(body, version),
        ApiKey::Produce => decode::<ProduceResponse>(body, version),
        ApiKey::EndTxn => decode::<EndTxnResponse>(body, version),
        ApiKey::Metadata => decode::<MetadataResponse>(body, version),
        ApiKey::DescribeConfigs => decode::<DescribeConfigsResponse>(body, version),
        ApiKey::ListOffsets => decode::<ListOffsetsResponse>(body, version),
        ApiKey::AddOffsetsToTxn => decode::<AddOffsetsToTxnResponse>(body, version),
        ApiKey::TxnOffsetCommit => decode::<TxnOffsetCommitResponse>(body, version),
        ApiKey::OffsetFetch => decode::<OffsetFetchResponse>(body, version),
        ApiKey::Fetch => {
            // And the record batches a Fetch answer carries, through the
            // reader that looks past an open transaction.
            if let Ok(resp) = FetchResponse::decode(&mut Bytes::copy_from_slice(body), version) {
                for records in resp
                    .responses
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .filter_map(|p| p.records.as_ref())
                {
                    let _ = read_batches(records);
                }
            }
        }
        other => panic!("the frame check covers {other:?}, which this target does not decode"),
    }
});
