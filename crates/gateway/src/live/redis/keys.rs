//! Where each piece of live state sits in Redis. Everything of one answer shares its
//! id as a hash tag (`{msg_…}`), and everything of one person or one model a hashed
//! tag of its own, so that scripts touching them stay in one slot of a Redis Cluster.
//! Answers are keyed by their own id, never by their conversation: two tabs of one
//! conversation never see each other's answer.

use sha2::{Digest, Sha256};

use maitred_protocol::ids::{MessageId, Subject};

#[derive(Debug, Clone)]
pub(super) struct Keys {
    prefix: String,
}

impl Keys {
    pub(super) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    fn of(&self, id: &MessageId, what: &str) -> String {
        format!("{}:{{{id}}}:{what}", self.prefix)
    }

    /// The answer's events, a stream whose entry ids are `<seq>-0`.
    pub(super) fn events(&self, id: &MessageId) -> String {
        self.of(id, "events")
    }

    /// A hash: who asked, in which conversation, which replica runs it, its status.
    pub(super) fn answer(&self, id: &MessageId) -> String {
        self.of(id, "answer")
    }

    /// The owning replica's name, expiring unless renewed.
    pub(super) fn lease(&self, id: &MessageId) -> String {
        self.of(id, "lease")
    }

    /// Present while some replica has a viewer of the answer.
    pub(super) fn watched(&self, id: &MessageId) -> String {
        self.of(id, "watched")
    }

    /// Taken by the one replica that ends an answer whose owner died.
    pub(super) fn sweep(&self, id: &MessageId) -> String {
        self.of(id, "sweep")
    }

    /// Every running answer, scored by when its lease runs out.
    pub(super) fn leases(&self) -> String {
        format!("{}:leases", self.prefix)
    }

    /// A person's running answers (a sorted set) and question rate (GCRA).
    pub(super) fn person(&self, subject: &Subject) -> (String, String) {
        let tag = tag("person", subject.as_str());
        (
            format!("{}:{{{tag}}}:running", self.prefix),
            format!("{}:{{{tag}}}:rate", self.prefix),
        )
    }

    /// A person's open answer streams (a sorted set, like their running answers), with
    /// their question rate's key beside it for the admitting script (which leaves it
    /// alone: streams have no rate).
    pub(super) fn viewers(&self, subject: &Subject) -> (String, String) {
        let tag = tag("person", subject.as_str());
        (
            format!("{}:{{{tag}}}:viewers", self.prefix),
            format!("{}:{{{tag}}}:rate", self.prefix),
        )
    }

    /// A model's requests in flight (a sorted set) and request rate (GCRA).
    pub(super) fn model(&self, model: &str) -> (String, String) {
        let tag = tag("model", model);
        (
            format!("{}:{{{tag}}}:slots", self.prefix),
            format!("{}:{{{tag}}}:rate", self.prefix),
        )
    }

    /// Where an answer's new events are announced.
    pub(super) fn channel(&self, id: &MessageId) -> String {
        format!("{}:events:{id}", self.prefix)
    }

    /// Cancels and wake-ups for whichever replica they concern.
    pub(super) fn control(&self) -> String {
        format!("{}:control", self.prefix)
    }
}

/// A subject or model name may hold any character, braces too: hashed, it makes a
/// safe hash tag.
fn tag(kind: &str, name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    format!("{kind}:{}", hex::encode(&digest[..12]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answers_keys_share_its_hash_tag_and_a_person_gets_a_safe_one() {
        let keys = Keys::new("maitred");
        let id = MessageId::new();
        let tag = format!("{{{id}}}");
        for key in [keys.events(&id), keys.answer(&id), keys.lease(&id)] {
            assert!(key.contains(&tag), "{key}");
        }
        let (running, rate) = keys.person(&Subject::new("eve}{evil"));
        assert_eq!(running.matches('{').count(), 1, "{running}");
        assert_eq!(
            running.split('}').next(),
            rate.split('}').next(),
            "one slot for one person"
        );
        let (viewers, _) = keys.viewers(&Subject::new("eve}{evil"));
        assert_eq!(viewers.split('}').next(), running.split('}').next());
        assert_ne!(viewers, running);
    }
}
