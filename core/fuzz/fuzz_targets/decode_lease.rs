//! `decode_lease` on arbitrary bytes: never panics; a failure names the lease
//! value part; a success re-encodes to exactly the input.
#![no_main]

use krabka_coordination::codec::{decode_lease, encode_lease};
use krabka_coordination::Part;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_lease(data) {
        Ok(lease) => {
            let again = encode_lease(&lease).expect("a decoded lease encodes");
            assert_eq!(
                again, data,
                "decode_lease then encode_lease changed the bytes"
            );
        }
        Err(e) => {
            assert_eq!(e.part, Part::LeaseValue);
            assert!(!e.message.is_empty());
        }
    }
});
