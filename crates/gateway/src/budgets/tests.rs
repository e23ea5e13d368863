//! Reserve, settle and refund against a real SQLite database, and many reservations
//! at once against one cap.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::DbBudgets;
use crate::answer::ports::{AnswerRef, BudgetAsk, Budgets, Reserved};
use maitred_core::db::Db;
use maitred_core::settings::prices::Price;
use maitred_protocol::ids::{ConversationId, MessageId, Subject};

async fn budgets(dir: &tempfile::TempDir) -> DbBudgets {
    let url = format!("sqlite:{}", dir.path().join("b.db").display());
    let db = Db::connect(&url).await.unwrap();
    db.migrate().await.unwrap();
    let prices = BTreeMap::from([(
        "m".to_owned(),
        Price {
            input_per_million: 1.0,
            output_per_million: 2.0,
        },
    )]);
    DbBudgets::new(db, prices, vec!["m".to_owned()])
}

async fn set(b: &DbBudgets, scope: &str, subject: &str, tokens: Option<i64>, cost: Option<i64>) {
    sqlx::query(
        "INSERT INTO budgets (scope, subject, time_window, max_tokens, max_cost_micros, updated_at) VALUES ($1, $2, 'daily', $3, $4, 'now')",
    )
    .bind(scope)
    .bind(subject)
    .bind(tokens)
    .bind(cost)
    .execute(b.db().pool())
    .await
    .unwrap();
}

fn answer(owner: &str) -> AnswerRef {
    AnswerRef {
        message: MessageId::new(),
        conversation: ConversationId::new(),
        owner: Subject::new(owner),
    }
}

async fn reserve(b: &DbBudgets, answer: &AnswerRef, roles: &[String], input: u64) -> Reserved {
    b.reserve(&BudgetAsk {
        answer,
        roles,
        input_tokens: input,
        output_tokens: 100,
    })
    .await
    .unwrap()
}

/// reserved, settled, refunded tokens over the whole ledger, and its open rows.
async fn totals(b: &DbBudgets) -> (i64, i64, i64, i64) {
    sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(reserved_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(settled_tokens), 0) AS BIGINT), \
                CAST(COALESCE(SUM(refunded_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(CASE WHEN status = 'reserved' THEN 1 ELSE 0 END), 0) AS BIGINT) \
         FROM budget_ledger",
    )
    .fetch_one(b.db().pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn without_a_budget_nothing_is_reserved() {
    let dir = tempfile::tempdir().unwrap();
    let b = budgets(&dir).await;
    assert!(matches!(
        reserve(&b, &answer("ann"), &[], 10).await,
        Reserved::Free
    ));
    assert_eq!(totals(&b).await, (0, 0, 0, 0));
}

#[tokio::test]
async fn a_reservation_is_settled_with_real_use_and_the_rest_refunded() {
    let dir = tempfile::tempdir().unwrap();
    let b = budgets(&dir).await;
    set(&b, "person", "*", Some(1_000), Some(10_000)).await;
    let ann = answer("ann");
    let Reserved::Held(held) = reserve(&b, &ann, &[], 200).await else {
        panic!("refused")
    };
    // 300 tokens reserved, 200 at 1 and 100 at 2 micro-units: 400.
    assert_eq!(totals(&b).await, (300, 0, 0, 1));
    let left = b.settle(&held, "m", 150, 30).await.unwrap().unwrap();
    assert_eq!(left.scope, "person");
    assert_eq!(left.tokens, Some(1_000 - 180));
    assert_eq!(left.cost_micros, Some(10_000 - 210));
    assert_eq!(totals(&b).await, (300, 180, 120, 0));
}

#[tokio::test]
async fn a_turn_that_does_not_fit_is_refused_and_reserves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = budgets(&dir).await;
    set(&b, "role", "TEAM", Some(500), None).await;
    set(&b, "person", "ann", Some(10_000), None).await;
    let team = vec!["TEAM".to_owned()];
    let ann = answer("ann");
    let Reserved::Held(first) = reserve(&b, &ann, &team, 200).await else {
        panic!("refused")
    };
    // 300 of 500 held: another 300 does not fit, whoever asks.
    let Reserved::Refused(left) = reserve(&b, &answer("bob"), &team, 200).await else {
        panic!("reserved past the cap")
    };
    assert_eq!((left.scope.as_str(), left.tokens), ("role", Some(200)));
    // Settled at 100, the refund makes room again.
    b.settle(&first, "m", 60, 40).await.unwrap();
    assert!(matches!(
        reserve(&b, &answer("bob"), &team, 200).await,
        Reserved::Held(_)
    ));
    // Two rows for ann's turn (person and role), one for bob's: none refused wrote.
    let (reserved, settled, refunded, open) = totals(&b).await;
    assert_eq!((reserved, settled, refunded, open), (900, 200, 400, 1));
}

#[tokio::test]
async fn a_failed_turn_is_refunded_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let b = budgets(&dir).await;
    set(&b, "conversation", "*", Some(1_000), None).await;
    let Reserved::Held(held) = reserve(&b, &answer("ann"), &[], 10).await else {
        panic!("refused")
    };
    b.settle(&held, "m", 0, 0).await.unwrap();
    assert_eq!(totals(&b).await, (110, 0, 110, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_reservations_at_once_never_pass_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let b = Arc::new(budgets(&dir).await);
    // Each reserves 1,000 (900 + 100): a cap of 12,500 lets 12 through.
    set(&b, "role", "TEAM", Some(12_500), None).await;
    let tracker = tokio_util::task::TaskTracker::new();
    let mut running = Vec::new();
    for _ in 0..48 {
        let b = b.clone();
        running.push(tracker.spawn(async move {
            let team = vec!["TEAM".to_owned()];
            reserve(&b, &answer("ann"), &team, 900).await
        }));
    }
    let mut held = Vec::new();
    for r in running {
        if let Reserved::Held(h) = r.await.unwrap() {
            held.push(h);
        }
    }
    assert_eq!(held.len(), 12);
    let (reserved, _, _, open) = totals(&b).await;
    assert!(reserved <= 12_500);
    assert_eq!(open, 12);
    for h in &held {
        b.settle(h, "m", 500, 50).await.unwrap();
    }
    let (reserved, settled, refunded, open) = totals(&b).await;
    assert_eq!((settled, open), (12 * 550, 0));
    assert_eq!(reserved, settled + refunded);
}

#[tokio::test]
async fn a_reservation_a_crash_left_open_is_closed_as_spent_after_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let b = budgets(&dir).await;
    set(&b, "person", "*", Some(1_000), None).await;
    let ann = answer("ann");
    let Reserved::Held(_lost) = reserve(&b, &ann, &[], 200).await else {
        panic!("refused")
    };
    // Its gateway died mid-turn an hour ago.
    sqlx::query("UPDATE budget_ledger SET created_at = '2000-01-01T00:00:00.000Z'")
        .execute(b.db().pool())
        .await
        .unwrap();
    let Reserved::Held(_) = reserve(&b, &ann, &[], 200).await else {
        panic!("refused")
    };
    let (reserved, settled, refunded, open) = totals(&b).await;
    assert_eq!((reserved, settled, refunded, open), (600, 300, 0, 1));
}
