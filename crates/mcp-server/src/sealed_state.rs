//! The `requestState` of a 2026-07-28 input round trip (SEP-2322). The client
//! echoes it back untouched, or so we must not assume: it is signed (HMAC, rmcp's
//! `RequestStateCodec`), expires, and is bound to the caller, the tool and the exact
//! arguments, so it cannot be replayed by another client or for other arguments.

use std::time::Duration;

use rmcp::model::{JsonObject, RequestStateCodec, RequestStateError, SealOptions};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};

use maitred_core::auth::Principal;

/// How long a person has to answer a form before the call must start again.
pub(super) const STATE_TTL: Duration = Duration::from_secs(10 * 60);

#[derive(Clone)]
pub struct StateSeal {
    codec: RequestStateCodec,
}

impl StateSeal {
    /// A key derived from the MCP role's own client secret: every replica of the role
    /// shares it and it survives restarts, with no further setting to keep in step.
    /// Rotating that secret voids the forms still open, which only start again.
    pub fn from_secret(secret: &SecretString) -> Self {
        let key = Sha256::new()
            .chain_update(b"maitred/mcp/request-state/v1\0")
            .chain_update(secret.expose_secret().as_bytes())
            .finalize();
        Self {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
        }
    }

    pub(super) fn seal<T: Serialize>(&self, value: &T, binding: &Binding) -> String {
        let options = SealOptions::new()
            .associated_data(&binding.0)
            .ttl(STATE_TTL);
        // Our own small types always serialize; an empty state is refused on return.
        self.codec
            .seal_json_with(value, &options)
            .unwrap_or_default()
    }

    pub(super) fn open<T: DeserializeOwned>(
        &self,
        sealed: &str,
        binding: &Binding,
    ) -> Result<T, RequestStateError> {
        self.codec.open_json_with(sealed, &binding.0)
    }
}

/// What a request state is bound to: a digest of the caller, the tool and its arguments.
pub(super) struct Binding([u8; 32]);

impl Binding {
    pub(super) fn new(caller: Option<&Principal>, tool: &str, arguments: &JsonObject) -> Self {
        let (subject, client) = caller.map_or(("local", ""), |p| {
            (p.subject.as_str(), p.client_id.as_deref().unwrap_or(""))
        });
        let mut digest = Sha256::new();
        for part in [subject, client, tool] {
            digest.update(part.len().to_be_bytes());
            digest.update(part.as_bytes());
        }
        digest.update(canonical(&Value::Object(arguments.clone())).as_bytes());
        Self(digest.finalize().into())
    }
}

/// JSON with every object's keys in order, so equal arguments give equal bytes
/// whatever order the client wrote them in.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    fn principal(subject: &str, client: &str) -> Principal {
        Principal {
            subject: subject.to_owned(),
            client_id: Some(client.to_owned()),
            ..Principal::default()
        }
    }

    #[test]
    fn a_state_opens_only_for_the_same_caller_tool_and_arguments() {
        let seal = StateSeal::from_secret(&SecretString::from("a client secret"));
        let gateway = principal("svc", "maitred-gateway");
        let args = object(json!({"date": "2026-12-01", "people": 2, "time": "19:00"}));
        let state = seal.seal(
            &json!({"asked": "contact"}),
            &Binding::new(Some(&gateway), "createBooking", &args),
        );
        let reordered = object(json!({"time": "19:00", "people": 2, "date": "2026-12-01"}));
        let opened: Value = seal
            .open(
                &state,
                &Binding::new(Some(&gateway), "createBooking", &reordered),
            )
            .unwrap();
        assert_eq!(opened, json!({"asked": "contact"}));

        let other_args = object(json!({"date": "2026-12-02", "people": 2, "time": "19:00"}));
        let other_client = principal("svc", "maitred-cli");
        for binding in [
            Binding::new(Some(&gateway), "createBooking", &other_args),
            Binding::new(Some(&other_client), "createBooking", &args),
            Binding::new(Some(&gateway), "updateBooking", &args),
            Binding::new(None, "createBooking", &args),
        ] {
            assert!(matches!(
                seal.open::<Value>(&state, &binding),
                Err(RequestStateError::IntegrityCheckFailed)
            ));
        }
        let other_key = StateSeal::from_secret(&SecretString::from("another secret"));
        assert!(
            other_key
                .open::<Value>(
                    &state,
                    &Binding::new(Some(&gateway), "createBooking", &args)
                )
                .is_err()
        );
    }
}
