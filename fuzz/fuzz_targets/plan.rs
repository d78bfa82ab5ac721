//! Plan files (`--from-plan FILE`): any bytes load or are refused; a plan
//! that loads writes back to the same plan.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tether::plan::Plan;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Plan::from_json(&String::from_utf8_lossy(data)) {
        let back = Plan::from_json(&p.to_json_pretty()).unwrap();
        assert_eq!(back.to_value(), p.to_value());
    }
});
