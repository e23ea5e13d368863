//! Before `createBooking` books: when the guest's details are missing or the name
//! is ambiguous, ask the person with a form — mid-call on 2025-11-25
//! (`elicitation/create`), or as an `InputRequiredResult` the client answers by
//! calling again on 2026-07-28 — and go on with what they give.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, InputRequest,
    InputRequiredResult, JsonObject, ProtocolVersion,
};
use rmcp::service::RequestContext;

use super::backend::BackendClient;
use super::call::{Answer, Call, Refusal, tool_error};
use super::catalogue::Settled;
use super::guest_form::{self, Guest, Question};
use super::metrics::Outcome;
use super::sealed_state::{Binding, StateSeal};
use super::tools;

/// The key of our one input request in `inputRequests` / `inputResponses`.
pub(super) const INPUT_KEY: &str = "guest";

/// How many same-named customers the choice offers at most.
const MAX_CHOICES: u32 = 6;

/// A retry this server cannot honour (a forged, expired or foreign state): -32602.
fn invalid(message: String) -> Answer {
    Refusal::InvalidParams(message).answer()
}

/// Whether the caller can show a form: it declared `elicitation` with form mode (an
/// empty declaration means form, as in 2025-06-18).
fn shows_forms(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

fn round_trips(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// "the table for 2 on 2026-12-01 at 19:00", for the form's message.
fn booking_words(arguments: &JsonObject) -> String {
    let field = |key: &str| {
        arguments
            .get(key)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_else(|| "?".to_owned())
    };
    format!(
        "the table for {} on {} at {}",
        field("people"),
        field("date"),
        field("time")
    )
}

/// `createBooking`'s step before it books: the arguments with the guest settled,
/// or the call's answer (a form to fill in, or why nothing was booked).
pub(super) fn ask_for_guest<'a>(
    call: &'a Call<'a>,
    arguments: JsonObject,
) -> BoxFuture<'a, Result<Settled, Answer>> {
    Box::pin(settle(call, arguments))
}

/// Arguments that book with the caller's own idempotency key, if any.
fn as_asked(arguments: JsonObject) -> Settled {
    Settled {
        arguments,
        idempotency_key: None,
    }
}

/// The idempotency key of the booking a `requestState` leads to: one state books
/// once. Sent again (a replay, a double submit), with the same answer it gets the
/// same booking back from the backend, with another answer a refusal
/// (`IDEMPOTENCY_KEY_REUSED`): never a second booking. The backend keeps keys per
/// caller for a day, far longer than a state lives (`STATE_TTL`).
fn once_per_state(state: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(state.as_bytes());
    let hex: String = digest[..20].iter().map(|b| format!("{b:02x}")).collect();
    format!("request-state-{hex}")
}

async fn settle(call: &Call<'_>, arguments: JsonObject) -> Result<Settled, Answer> {
    let Call {
        request,
        ctx,
        caller,
        backend,
        seal,
    } = *call;
    let binding = Binding::new(caller, &request.name, &arguments);
    if round_trips(ctx) && (request.request_state.is_some() || request.input_responses.is_some()) {
        return answered_retry(seal, backend, request, &binding, arguments).await;
    }
    let known = Guest::from_arguments(&arguments);
    // A client without forms gets what it always got: the tool's own answer.
    if known.is_complete() || !shows_forms(ctx) {
        return Ok(as_asked(arguments));
    }
    let (question, form) = ask(backend, &known, &arguments)
        .await
        .map_err(Refusal::answer)?;
    if round_trips(ctx) {
        let requests = BTreeMap::from([(
            INPUT_KEY.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(form)),
        )]);
        let state = seal.seal(&question, &binding);
        return Err((
            Outcome::InputRequired,
            Ok(InputRequiredResult::new(Some(requests), Some(state)).into()),
        ));
    }
    match ctx.peer.create_elicitation(form).await {
        Ok(result) => apply(backend, &question, &known, result, arguments)
            .await
            .map(as_asked),
        Err(e) => {
            tracing::warn!(error = %e, "the guest form could not be shown");
            Err(tool_error(
                Outcome::ToolError,
                "The form for the guest's details could not be shown, so nothing was booked. Ask \
the person in the chat for the guest's name and an email address or phone number, then call \
createBooking again with them."
                    .to_owned(),
            ))
        }
    }
}

/// The 2026-07-28 retry: the state must be ours, for this caller and these arguments.
async fn answered_retry(
    seal: &StateSeal,
    backend: &BackendClient,
    request: &CallToolRequestParams,
    binding: &Binding,
    arguments: JsonObject,
) -> Result<Settled, Answer> {
    let Some(state) = request.request_state.as_deref() else {
        return Err(invalid(
            "inputResponses came without the requestState they answer; call createBooking again \
without inputResponses"
                .to_owned(),
        ));
    };
    let question: Question = match seal.open(state, binding) {
        Ok(question) => question,
        Err(e) => {
            tracing::warn!(error = %e, "a createBooking retry with a requestState that does not open");
            return Err(invalid(format!(
                "the requestState does not belong to this call ({e}): it was issued for another \
caller or other arguments, was changed, or has expired; call createBooking again without it"
            )));
        }
    };
    let response = request
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(INPUT_KEY))
        .cloned();
    let Some(result) = response.and_then(|r| serde_json::from_value::<ElicitResult>(r).ok()) else {
        return Err(invalid(format!(
            "inputResponses must answer the input request {INPUT_KEY:?} with an elicitation result"
        )));
    };
    let known = Guest::from_arguments(&arguments);
    let arguments = apply(backend, &question, &known, result, arguments).await?;
    Ok(Settled {
        arguments,
        idempotency_key: Some(once_per_state(state)),
    })
}

/// What to ask, and its form: a name shared by several customers is a choice of
/// them; anything else asks for the guest's details.
async fn ask(
    backend: &BackendClient,
    known: &Guest,
    arguments: &JsonObject,
) -> Result<(Question, ElicitRequestParams), Refusal> {
    let booking = booking_words(arguments);
    if let Some(name) = &known.name {
        let same_name = tools::customers_named(backend, name, MAX_CHOICES).await?;
        if same_name.len() >= 2 {
            let form = guest_form::choice_form(name, &same_name, &booking);
            let question = Question::Choice {
                name: name.clone(),
                customers: same_name.into_iter().map(|c| c.id).collect(),
            };
            return Ok((question, form));
        }
    }
    Ok((Question::Contact, guest_form::contact_form(known, &booking)))
}

async fn apply(
    backend: &BackendClient,
    question: &Question,
    known: &Guest,
    result: ElicitResult,
    arguments: JsonObject,
) -> Result<JsonObject, Answer> {
    let guest = match guest_form::read(question, known, result) {
        guest_form::Answer::Guest(guest) => guest,
        guest_form::Answer::Customer(id) => tools::customer(backend, &id)
            .await
            .map(Guest::from)
            .map_err(Refusal::answer)?,
        guest_form::Answer::Refused(text) => return Err(tool_error(Outcome::ToolError, text)),
    };
    Ok(guest.into_arguments(arguments))
}
