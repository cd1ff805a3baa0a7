//! `decode_registration` on arbitrary bytes: never panics; a failure names the
//! registration value part; a success re-encodes to exactly the input.
#![no_main]

use krabka_coordination::codec::{decode_registration, encode_registration};
use krabka_coordination::Part;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_registration(data) {
        Ok(reg) => {
            let again = encode_registration(&reg).expect("a decoded registration encodes");
            assert_eq!(
                again, data,
                "decode_registration then encode_registration changed the bytes"
            );
        }
        Err(e) => {
            assert_eq!(e.part, Part::RegistrationValue);
            assert!(!e.message.is_empty());
        }
    }
});
