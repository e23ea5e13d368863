//! How events are written in Redis: a stream entry `<seq>-0` with fields `n` (the
//! event's name) and `d` (its JSON data); an announcement on the answer's channel is
//! the batch's events as a JSON array of `[seq, name, data]`.

use std::collections::HashMap;

use redis::Value;
use redis::streams::StreamRangeReply;

use crate::live::LoggedEvent;

pub(super) fn entry_id(seq: u64) -> String {
    format!("{seq}-0")
}

/// `XADD key [MAXLEN ~ max] <seq>-0 n <name> d <data>`: one event, at the entry id of
/// its sequence number.
pub(super) fn xadd(
    pipe: &mut redis::Pipeline,
    key: String,
    max_len: Option<usize>,
    event: &LoggedEvent,
) {
    let cmd = pipe.cmd("XADD").arg(key);
    if let Some(max) = max_len {
        cmd.arg("MAXLEN").arg("~").arg(max);
    }
    cmd.arg(entry_id(event.seq))
        .arg("n")
        .arg(&*event.name)
        .arg("d")
        .arg(&*event.data)
        .ignore();
}

pub(super) fn encode_batch(events: &[&LoggedEvent]) -> String {
    let array: Vec<(u64, &str, &str)> =
        events.iter().map(|e| (e.seq, &*e.name, &*e.data)).collect();
    serde_json::to_string(&array).unwrap_or_else(|_| "[]".to_owned())
}

pub(super) fn decode_batch(payload: &str) -> Option<Vec<LoggedEvent>> {
    let array: Vec<(u64, String, String)> = serde_json::from_str(payload).ok()?;
    Some(
        array
            .into_iter()
            .map(|(seq, name, data)| LoggedEvent {
                seq,
                name: name.into(),
                data: data.into(),
            })
            .collect(),
    )
}

/// The events of an XRANGE reply, in order; entries that are not ours are skipped.
pub(super) fn from_range(reply: StreamRangeReply) -> Vec<LoggedEvent> {
    reply
        .ids
        .into_iter()
        .filter_map(|entry| {
            let seq = entry.id.split('-').next()?.parse().ok()?;
            let field = |map: &HashMap<String, Value>, key: &str| match map.get(key) {
                Some(Value::BulkString(bytes)) => String::from_utf8(bytes.clone()).ok(),
                Some(Value::SimpleString(text)) => Some(text.clone()),
                _ => None,
            };
            Some(LoggedEvent {
                seq,
                name: field(&entry.map, "n")?.into(),
                data: field(&entry.map, "d")?.into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reads_back_as_written() {
        let events = [
            LoggedEvent {
                seq: 7,
                name: "token".into(),
                data: r#"{"text":"a\nb \"c\""}"#.into(),
            },
            LoggedEvent {
                seq: 8,
                name: "done".into(),
                data: r#"{"finish_reason":"stop"}"#.into(),
            },
        ];
        let decoded = decode_batch(&encode_batch(&events.iter().collect::<Vec<_>>())).unwrap();
        assert_eq!(decoded, events);
        assert_eq!(entry_id(7), "7-0");
    }
}
