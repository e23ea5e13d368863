//! The forms `createBooking` shows a person when the guest's details are missing or
//! the name is ambiguous, and the reading of their answers. Answers come from a
//! client, so they are checked here as strictly as the backend checks a booking.

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, JsonObject,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use maitred_backend::contact::{compact_phone, valid_e164, valid_email};
use maitred_backend::model::Customer;

/// The value of the choice that means "none of these customers".
pub(super) const NEW_GUEST: &str = "new";

/// The guest's details as the call gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Guest {
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
}

impl Guest {
    pub(super) fn from_arguments(arguments: &JsonObject) -> Self {
        let text = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Self {
            name: text("guestName"),
            email: text("guestEmail"),
            phone: text("guestPhone"),
        }
    }

    /// A name and a way to reach the guest: nothing to ask.
    pub(super) fn is_complete(&self) -> bool {
        self.name.is_some() && (self.email.is_some() || self.phone.is_some())
    }

    /// `arguments` with these details in place of the guest fields.
    pub(super) fn into_arguments(self, mut arguments: JsonObject) -> JsonObject {
        for (key, value) in [
            ("guestName", self.name),
            ("guestEmail", self.email),
            ("guestPhone", self.phone),
        ] {
            match value {
                Some(value) => arguments.insert(key.to_owned(), Value::String(value)),
                None => arguments.remove(key),
            };
        }
        arguments
    }
}

/// An existing customer's details, to book for them.
impl From<Customer> for Guest {
    fn from(customer: Customer) -> Self {
        Self {
            name: Some(customer.name),
            email: customer.email,
            phone: customer.phone,
        }
    }
}

/// What was asked; a 2026-07-28 request state carries it to the retry, sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "asked", rename_all = "camelCase")]
pub(super) enum Question {
    /// The guest's name and an email or phone.
    Contact,
    /// Which of these customers (ids), all called `name`, or a new guest.
    Choice {
        name: String,
        customers: Vec<String>,
    },
}

/// What the person's answer means for the booking.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Book for this guest (checked).
    Guest(Guest),
    /// Book for this existing customer (one of those offered).
    Customer(String),
    /// Book nothing: the text tells the model why and what to do.
    Refused(String),
}

fn form(message: String, schema: Value) -> ElicitRequestParams {
    let requested_schema = match schema {
        Value::Object(schema) => ElicitationSchema::from_json_schema(schema),
        _ => ElicitationSchema::from_json_schema(JsonObject::new()),
    }
    .unwrap_or_else(|_| ElicitationSchema::new(Default::default()));
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    }
}

fn contact_fields(for_new_guest: bool) -> (Value, Value) {
    let either = if for_new_guest {
        " (for a new guest: give this or a phone number)"
    } else {
        " (give this or a phone number)"
    };
    let email = json!({
        "type": "string",
        "title": "Email",
        "description": format!("For the booking's confirmation{either}"),
        "format": "email",
        "maxLength": 254,
    });
    let phone = json!({
        "type": "string",
        "title": "Phone",
        "description": "With the country code, e.g. +4512345678 (give this or an email)",
        "minLength": 8,
        "maxLength": 20,
    });
    (email, phone)
}

/// "Who is the booking for?": the guest's name and an email or phone.
pub(super) fn contact_form(known: &Guest, booking: &str) -> ElicitRequestParams {
    let (email, phone) = contact_fields(false);
    let mut name = json!({
        "type": "string",
        "title": "Name",
        "description": "The guest's full name",
        "minLength": 2,
        "maxLength": 100,
    });
    // What the call already gave is filled in, so the person only adds what is missing.
    let mut email = email;
    let mut phone = phone;
    for (field, value) in [
        (&mut name, &known.name),
        (&mut email, &known.email),
        (&mut phone, &known.phone),
    ] {
        if let Some(value) = value {
            field["default"] = Value::String(value.clone());
        }
    }
    form(
        format!(
            "Who is the booking for? Give the guest's name and an email address or phone number \
for {booking}."
        ),
        json!({
            "type": "object",
            "properties": { "guestName": name, "guestEmail": email, "guestPhone": phone },
            "required": ["guestName"],
        }),
    )
}

/// "Which Anna Berg?": the customers of that name, shown without their full details.
pub(super) fn choice_form(
    name: &str,
    customers: &[Customer],
    booking: &str,
) -> ElicitRequestParams {
    let mut options: Vec<Value> = customers
        .iter()
        .map(|c| json!({ "const": c.id, "title": describe(c) }))
        .collect();
    options.push(json!({ "const": NEW_GUEST, "title": format!("A new guest called {name}") }));
    let (email, phone) = contact_fields(true);
    form(
        format!(
            "More than one guest is called {name}. Which one is {booking} for? For a new guest, \
give an email address or phone number too."
        ),
        json!({
            "type": "object",
            "properties": {
                "guest": { "type": "string", "title": "Guest", "oneOf": options },
                "guestEmail": email,
                "guestPhone": phone,
            },
            "required": ["guest"],
        }),
    )
}

/// A customer as the choice shows them: the name and enough of the email and phone
/// to tell them apart, no more.
fn describe(customer: &Customer) -> String {
    let mut hints = Vec::new();
    if let Some(email) = &customer.email {
        hints.push(mask_email(email));
    }
    if let Some(phone) = &customer.phone {
        hints.push(mask_phone(phone));
    }
    if hints.is_empty() {
        hints.push("no contact details on file".to_owned());
    }
    format!("{} ({})", customer.name, hints.join(", "))
}

fn mask_email(email: &str) -> String {
    match email.split_once('@') {
        Some((local, domain)) => {
            let first: String = local.chars().take(1).collect();
            format!("{first}•••@{domain}")
        }
        None => "•••".to_owned(),
    }
}

fn mask_phone(phone: &str) -> String {
    let digits: Vec<char> = phone.chars().filter(char::is_ascii_digit).collect();
    let last: String = digits[digits.len().saturating_sub(2)..].iter().collect();
    format!("phone ending {last}")
}

/// What the person's answer to `question` means; a field the form left empty keeps
/// what the call gave (`known`).
pub(super) fn read(question: &Question, known: &Guest, result: ElicitResult) -> Answer {
    match result.action {
        ElicitationAction::Decline => {
            return Answer::Refused(
                "The person declined to give the guest's details, so nothing was booked. Ask them in \
the chat for the guest's name and an email address or phone number, and call createBooking again with \
guestName and guestEmail or guestPhone; or leave the booking if they do not want to give them."
                    .to_owned(),
            );
        }
        // Cancel, and any action a later revision adds: book nothing.
        _ if result.action != ElicitationAction::Accept => {
            return Answer::Refused(
                "The person cancelled the form for the guest's details, so nothing was booked. Do not \
book; ask them whether they still want the table."
                    .to_owned(),
            );
        }
        _ => {}
    }
    let content = match result.content {
        Some(Value::Object(content)) => content,
        _ => JsonObject::new(),
    };
    let answered = Guest::from_arguments(&content);
    let given = Guest {
        name: answered.name.or_else(|| known.name.clone()),
        email: answered.email.or_else(|| known.email.clone()),
        phone: answered.phone.or_else(|| known.phone.clone()),
    };
    match question {
        Question::Contact => checked(given),
        Question::Choice { name, customers } => {
            match content.get("guest").and_then(Value::as_str) {
                Some(NEW_GUEST) => checked(Guest {
                    name: Some(name.clone()),
                    ..given
                }),
                Some(id) if customers.iter().any(|c| c == id) => Answer::Customer(id.to_owned()),
                _ => Answer::Refused(
                    "The answer named none of the guests offered, so nothing was booked. Call \
createBooking again to ask once more."
                        .to_owned(),
                ),
            }
        }
    }
}

/// The details as the backend will take them, or why not.
fn checked(given: Guest) -> Answer {
    let mut problems = Vec::new();
    let name = given
        .name
        .filter(|n| (2..=100).contains(&n.chars().count()));
    if name.is_none() {
        problems.push("the name must be 2 to 100 characters".to_owned());
    }
    let email = given.email.filter(|e| {
        let ok = valid_email(e);
        if !ok {
            problems.push(format!("{e:?} is not an email address"));
        }
        ok
    });
    let phone = given.phone.map(|p| compact_phone(&p)).filter(|p| {
        let ok = valid_e164(p);
        if !ok {
            problems.push(format!(
                "{p:?} is not a phone number with its country code, such as +4512345678"
            ));
        }
        ok
    });
    if problems.is_empty() && email.is_none() && phone.is_none() {
        problems.push("an email address or a phone number is needed".to_owned());
    }
    if problems.is_empty() {
        Answer::Guest(Guest { name, email, phone })
    } else {
        Answer::Refused(format!(
            "The guest's details given in the form cannot be used ({}), so nothing was booked. Ask \
the person for them again and call createBooking with guestName and guestEmail or guestPhone.",
            problems.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(content: Value) -> ElicitResult {
        serde_json::from_value(json!({ "action": "accept", "content": content })).unwrap()
    }

    fn customer(id: &str, email: Option<&str>, phone: Option<&str>) -> Customer {
        serde_json::from_value(json!({
            "_id": id, "name": "Anna Berg", "email": email, "phone": phone,
            "createdAt": "2026-01-01T00:00:00Z", "bookingCount": 1, "totalSpent": 0.0,
        }))
        .unwrap()
    }

    #[test]
    fn a_contact_answer_is_checked_as_the_backend_would() {
        let ok = read(
            &Question::Contact,
            &Guest::default(),
            accept(json!({"guestName": " Ida Holm ", "guestPhone": "+45 20 12 34 56"})),
        );
        assert_eq!(
            ok,
            Answer::Guest(Guest {
                name: Some("Ida Holm".to_owned()),
                email: None,
                phone: Some("+4520123456".to_owned()),
            })
        );
        let Answer::Refused(why) = read(
            &Question::Contact,
            &Guest::default(),
            accept(json!({"guestName": "I", "guestEmail": "nope"})),
        ) else {
            panic!("a bad answer was accepted");
        };
        assert!(why.contains("2 to 100 characters") && why.contains("\"nope\" is not an email"));
        let Answer::Refused(why) = read(
            &Question::Contact,
            &Guest::default(),
            accept(json!({"guestName": "Ida Holm"})),
        ) else {
            panic!("an answer without contact was accepted");
        };
        assert!(why.contains("an email address or a phone number is needed"));
    }

    #[test]
    fn what_the_call_gave_is_kept_and_shown() {
        let known = Guest {
            name: None,
            email: Some("ida@example.org".to_owned()),
            phone: None,
        };
        let answer = read(
            &Question::Contact,
            &known,
            accept(json!({"guestName": "Ida Holm"})),
        );
        assert_eq!(
            answer,
            Answer::Guest(Guest {
                name: Some("Ida Holm".to_owned()),
                email: Some("ida@example.org".to_owned()),
                phone: None,
            })
        );
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = contact_form(&known, "the table")
        else {
            panic!("not a form");
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(
            schema["properties"]["guestEmail"]["default"],
            "ida@example.org"
        );
        assert!(schema["properties"]["guestName"].get("default").is_none());
    }

    #[test]
    fn a_choice_answer_must_be_one_offered() {
        let question = Question::Choice {
            name: "Anna Berg".to_owned(),
            customers: vec!["c1".to_owned(), "c2".to_owned()],
        };
        assert_eq!(
            read(&question, &Guest::default(), accept(json!({"guest": "c2"}))),
            Answer::Customer("c2".to_owned())
        );
        assert!(matches!(
            read(&question, &Guest::default(), accept(json!({"guest": "c3"}))),
            Answer::Refused(_)
        ));
        assert_eq!(
            read(
                &question,
                &Guest::default(),
                accept(json!({"guest": "new", "guestEmail": "a@b.dk"}))
            ),
            Answer::Guest(Guest {
                name: Some("Anna Berg".to_owned()),
                email: Some("a@b.dk".to_owned()),
                phone: None,
            })
        );
        let declined: ElicitResult = serde_json::from_value(json!({"action": "decline"})).unwrap();
        let Answer::Refused(why) = read(&question, &Guest::default(), declined) else {
            panic!("a decline booked");
        };
        assert!(why.contains("declined"));
    }

    #[test]
    fn the_choice_shows_no_more_than_needed() {
        let customers = [
            customer("c1", Some("anna.berg@example.com"), Some("+4520123456")),
            customer("c2", None, None),
        ];
        let ElicitRequestParams::FormElicitationParams {
            requested_schema,
            message,
            ..
        } = choice_form(
            "Anna Berg",
            &customers,
            "the table for 2 on 2026-12-01 at 19:00",
        )
        else {
            panic!("not a form");
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        let options = &schema["properties"]["guest"]["oneOf"];
        assert_eq!(
            options[0]["title"],
            "Anna Berg (a•••@example.com, phone ending 56)"
        );
        assert_eq!(
            options[1]["title"],
            "Anna Berg (no contact details on file)"
        );
        assert_eq!(options[2]["const"], NEW_GUEST);
        assert!(message.contains("More than one guest is called Anna Berg"));
        let text = schema.to_string();
        assert!(!text.contains("anna.berg@") && !text.contains("20123456"));
    }
}
