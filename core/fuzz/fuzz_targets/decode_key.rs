//! `decode_key` on arbitrary bytes: never panics; a failure names the key
//! part; a success re-encodes to exactly the input (the layout is canonical).
#![no_main]

use krabka_coordination::codec::{decode_key, encode_key};
use krabka_coordination::Part;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_key(data) {
        Ok(key) => {
            let again = encode_key(&key).expect("a decoded key encodes");
            assert_eq!(again, data, "decode_key then encode_key changed the bytes");
        }
        Err(e) => {
            assert_eq!(e.part, Part::Key);
            assert!(!e.message.is_empty());
        }
    }
});
