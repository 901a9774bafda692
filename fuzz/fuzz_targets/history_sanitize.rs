//! Arbitrary bytes read as a chat history (a JSON array of OpenAI messages) through
//! `history`: `check` never panics; `sanitize` always yields a history `check` accepts,
//! and sanitizing it again changes nothing; `trim` of that history stays accepted for
//! message and token budgets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolmend::conversation::Message;
use toolmend::history::{
    Budget, ByteEstimate, MissingIdPolicy, OrphanPolicy, SanitizePolicy, check, sanitize, trim,
};

fuzz_target!(|data: &[u8]| {
    let Ok(messages) = serde_json::from_slice::<Vec<Message>>(data) else {
        return;
    };
    let _ = check(&messages);
    for (orphans, missing_ids) in [
        (OrphanPolicy::Drop, MissingIdPolicy::Mint),
        (OrphanPolicy::Rehome, MissingIdPolicy::Remove),
    ] {
        let policy = SanitizePolicy {
            orphans,
            missing_ids,
            ..SanitizePolicy::default()
        };
        let clean = sanitize(messages.clone(), &policy);
        let left = check(&clean.messages);
        assert!(left.is_empty(), "sanitize left {left:?}");
        let again = sanitize(clean.messages.clone(), &policy);
        assert!(
            again.actions.is_empty(),
            "sanitize is not idempotent: {:?}",
            again.actions
        );
        for budget in [Budget::Messages(3), Budget::Tokens(40)] {
            let trimmed = trim(clean.messages.clone(), budget, &ByteEstimate);
            let left = check(&trimmed.messages);
            assert!(left.is_empty(), "trim to {budget:?} left {left:?}");
        }
    }
});
