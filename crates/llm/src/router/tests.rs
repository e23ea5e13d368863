//! The router's decisions against models whose every answer is scripted here; the
//! scripted OpenAI-compatible upstream covers the same paths over the wire in the
//! integration tests.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::future::BoxFuture;

use super::*;
use crate::FinishReason;

/// What one request to a fake model does.
enum Answer {
    Fail(ModelError),
    /// Streams these events, each after `gap`.
    Events(Vec<ModelEvent>, Duration),
    /// Opens, then never sends anything.
    Silent,
}

struct Fake {
    name: &'static str,
    answers: Mutex<VecDeque<Answer>>,
    requests: Mutex<u32>,
}

impl Fake {
    fn new(name: &'static str, answers: Vec<Answer>) -> Arc<Self> {
        Arc::new(Self {
            name,
            answers: Mutex::new(answers.into()),
            requests: Mutex::new(0),
        })
    }

    fn requests(&self) -> u32 {
        *self.requests.lock().unwrap()
    }
}

impl ChatModel for Fake {
    fn name(&self) -> &str {
        self.name
    }

    fn stream(&self, _request: ChatRequest) -> BoxFuture<'_, Result<EventStream, ModelError>> {
        *self.requests.lock().unwrap() += 1;
        let answer = self.answers.lock().unwrap().pop_front();
        Box::pin(async move {
            match answer.expect("the fake model ran out of answers") {
                Answer::Fail(error) => Err(error),
                Answer::Silent => Ok(futures::stream::pending().boxed()),
                Answer::Events(events, gap) => Ok(futures::stream::iter(events)
                    .then(move |event| async move {
                        tokio::time::sleep(gap).await;
                        Ok(event)
                    })
                    .boxed()),
            }
        })
    }
}

fn text(fragments: &[&str]) -> Answer {
    let mut events: Vec<ModelEvent> = fragments
        .iter()
        .map(|f| ModelEvent::Text((*f).to_owned()))
        .collect();
    events.push(ModelEvent::Finished(FinishReason::Stop));
    Answer::Events(events, Duration::from_millis(10))
}

fn server_error() -> Answer {
    Answer::Fail(ModelError::Upstream {
        status: 500,
        message: "boom".into(),
        retry_after: None,
    })
}

fn routed(models: Vec<Arc<Fake>>, tweak: impl FnOnce(&mut Resilience)) -> ModelRouter {
    let mut policy = Resilience::default();
    tweak(&mut policy);
    let limits = Arc::new(crate::limits::LocalModelLimits::new(&policy));
    ModelRouter::new(
        models
            .into_iter()
            .map(|m| m as Arc<dyn ChatModel>)
            .collect(),
        policy,
        limits,
    )
}

/// Opens and reads the whole answer; returns the model, its text and the notes.
async fn ask(router: &ModelRouter) -> (Result<(String, String), ModelError>, Vec<String>) {
    let mut notes = Vec::new();
    let opened = router
        .open(&ChatRequest::default(), &mut |note| {
            notes.push(match note {
                Note::Retry { model, attempt, .. } => format!("retry {model} #{attempt}"),
                Note::Fallback { from, to, .. } => format!("fallback {from}->{to}"),
            });
        })
        .await;
    let result = match opened {
        Err(error) => Err(error),
        Ok(Opened { model, mut stream }) => {
            let mut text = String::new();
            let mut failure = None;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(ModelEvent::Text(t)) => text.push_str(&t),
                    Ok(_) => {}
                    Err(error) => failure = Some(error),
                }
            }
            match failure {
                Some(error) => Err(error),
                None => Ok((model, text)),
            }
        }
    };
    (result, notes)
}

#[tokio::test(start_paused = true)]
async fn a_server_error_before_the_first_token_is_retried() {
    let primary = Fake::new("a", vec![server_error(), text(&["Hel", "lo"])]);
    let router = routed(vec![primary.clone()], |_| {});
    let (result, notes) = ask(&router).await;
    assert_eq!(result.unwrap(), ("a".to_owned(), "Hello".to_owned()));
    assert_eq!(notes, ["retry a #1"]);
    assert_eq!(primary.requests(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_rejected_request_is_neither_retried_nor_sent_to_the_fallback() {
    let primary = Fake::new(
        "a",
        vec![Answer::Fail(ModelError::Upstream {
            status: 400,
            message: "bad".into(),
            retry_after: None,
        })],
    );
    let fallback = Fake::new("b", vec![]);
    let router = routed(vec![primary.clone(), fallback.clone()], |_| {});
    let (result, notes) = ask(&router).await;
    assert!(matches!(
        result,
        Err(ModelError::Upstream { status: 400, .. })
    ));
    assert!(notes.is_empty());
    assert_eq!((primary.requests(), fallback.requests()), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_goes_straight_to_the_fallback() {
    let primary = Fake::new(
        "a",
        vec![Answer::Fail(ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
        })],
    );
    let fallback = Fake::new("b", vec![text(&["ok"])]);
    let router = routed(vec![primary.clone(), fallback], |_| {});
    let (result, notes) = ask(&router).await;
    assert_eq!(result.unwrap(), ("b".to_owned(), "ok".to_owned()));
    assert_eq!(notes, ["fallback a->b"]);
    assert_eq!(primary.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn without_a_fallback_retry_after_is_waited_for_within_its_bound() {
    let primary = Fake::new(
        "a",
        vec![
            Answer::Fail(ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(3)),
            }),
            text(&["ok"]),
        ],
    );
    let router = routed(vec![primary], |_| {});
    let started = tokio::time::Instant::now();
    let (result, _) = ask(&router).await;
    assert!(result.is_ok());
    assert!(started.elapsed() >= Duration::from_secs(3));

    let impatient = Fake::new(
        "a",
        vec![Answer::Fail(ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(3600)),
        })],
    );
    let (result, notes) = ask(&router_with(impatient)).await;
    assert!(matches!(result, Err(ModelError::RateLimited { .. })));
    assert!(notes.is_empty());
}

fn router_with(model: Arc<Fake>) -> ModelRouter {
    routed(vec![model], |_| {})
}

#[tokio::test(start_paused = true)]
async fn exhausted_retries_fall_back_and_say_so() {
    let primary = Fake::new(
        "a",
        vec![
            Answer::Fail(ModelError::Connection("refused".into())),
            server_error(),
            server_error(),
        ],
    );
    let fallback = Fake::new("b", vec![text(&["fine"])]);
    let router = routed(vec![primary.clone(), fallback], |p| p.retries = 2);
    let (result, notes) = ask(&router).await;
    assert_eq!(result.unwrap().0, "b");
    assert_eq!(notes, ["retry a #1", "retry a #2", "fallback a->b"]);
    assert_eq!(primary.requests(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_silent_model_times_out_before_the_first_token_and_is_retried() {
    let primary = Fake::new("a", vec![Answer::Silent, text(&["late"])]);
    let router = routed(vec![primary], |p| {
        p.first_token_timeout = Duration::from_secs_f64(5.0)
    });
    let (result, notes) = ask(&router).await;
    assert_eq!(result.unwrap().1, "late");
    assert_eq!(notes, ["retry a #1"]);

    let silent = Fake::new("a", vec![Answer::Silent]);
    let router = routed(vec![silent], |p| {
        p.first_token_timeout = Duration::from_secs_f64(5.0);
        p.retries = 0;
    });
    let (result, _) = ask(&router).await;
    assert!(matches!(result, Err(ModelError::Timeout(_))));
}

#[tokio::test(start_paused = true)]
async fn a_stall_between_tokens_ends_the_stream_with_a_timeout() {
    let slow = Fake::new(
        "a",
        vec![Answer::Events(
            vec![
                ModelEvent::Text("a".into()),
                ModelEvent::Text("b".into()),
                ModelEvent::Finished(FinishReason::Stop),
            ],
            Duration::from_secs(10),
        )],
    );
    let router = routed(vec![slow.clone()], |p| {
        p.first_token_timeout = Duration::from_secs_f64(60.0);
        p.inter_token_timeout = Duration::from_secs_f64(2.0);
    });
    let (result, notes) = ask(&router).await;
    assert!(matches!(result, Err(ModelError::Timeout(_))));
    // Tokens had been handed out: no retry.
    assert!(notes.is_empty());
    assert_eq!(slow.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn requests_over_the_concurrency_limit_wait_and_then_give_up() {
    let model = Fake::new(
        "a",
        vec![Answer::Silent, text(&["second"]), text(&["third"])],
    );
    let router = routed(vec![model], |p| {
        p.model_concurrency = 1;
        p.model_wait = Duration::from_secs_f64(1.0);
        p.first_token_timeout = Duration::from_secs_f64(600.0);
        p.retries = 0;
    });
    // The first request holds the only slot until its stream is dropped.
    let request = ChatRequest::default();
    let mut ignore = |_: Note<'_>| {};
    let first = router.open(&request, &mut ignore);
    let held = tokio::time::timeout(Duration::from_secs(5), first).await;
    assert!(held.is_err(), "the silent model never gives a first token");
    // The timed-out open released its slot: the next request gets it at once.
    let (result, _) = ask(&router).await;
    assert_eq!(result.unwrap().1, "second");

    let waiting = router
        .limits
        .acquire("a", Duration::from_secs(1))
        .await
        .unwrap();
    let (result, _) = ask(&router).await;
    assert!(matches!(result, Err(ModelError::Busy(_))));
    drop(waiting);
    let (result, _) = ask(&router).await;
    assert_eq!(result.unwrap().1, "third");
}

/// Real time: governor keeps its own clock, which tokio's paused time does not move.
#[tokio::test]
async fn over_the_requests_per_minute_limit_a_request_waits_within_its_bound() {
    let model = Fake::new("a", vec![text(&["1"]), text(&["2"])]);
    let router = routed(vec![model.clone()], |p| {
        p.model_requests_per_minute = Some(1);
        p.model_wait = Duration::from_secs_f64(0.3);
    });
    assert!(ask(&router).await.0.is_ok());
    let started = std::time::Instant::now();
    let (result, _) = ask(&router).await;
    assert!(matches!(result, Err(ModelError::Busy(_))));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        model.requests(),
        1,
        "the waiting request never reached the model"
    );
}

#[tokio::test(start_paused = true)]
async fn a_503_that_says_when_to_come_back_is_retried_no_sooner() {
    let busy = || {
        Answer::Fail(ModelError::Upstream {
            status: 503,
            message: "busy".into(),
            retry_after: Some(Duration::from_secs(4)),
        })
    };
    let model = Fake::new("a", vec![busy(), text(&["ok"])]);
    let started = tokio::time::Instant::now();
    let (result, _) = ask(&router_with(model)).await;
    assert!(result.is_ok());
    assert!(started.elapsed() >= Duration::from_secs(4));

    let model = Fake::new("a", vec![busy()]);
    let (result, notes) = ask(&routed(vec![model], |p| {
        p.max_retry_after = Duration::from_secs_f64(2.0)
    }))
    .await;
    assert!(matches!(
        result,
        Err(ModelError::Upstream { status: 503, .. })
    ));
    assert!(notes.is_empty(), "a wait past the bound is not waited for");
}
