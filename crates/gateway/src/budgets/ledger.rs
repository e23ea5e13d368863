//! The ledger behind the budgets: reservations checked and written in one
//! transaction, settlements that close them.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::Any;

use super::{Budget, Scope, Window};
use crate::answer::ports::{BudgetAsk, Budgets, Held, Remaining, Reserved, StoreResult};
use maitred_core::db::{Db, DbKind, canonical, canonical_now};
use maitred_core::settings::prices::Price;

/// Budgets kept in the database.
pub struct DbBudgets {
    db: Db,
    prices: BTreeMap<String, Price>,
    /// Every model that may answer (the primary and its fallbacks): a turn is
    /// reserved at the dearest one's price, since any of them may end up answering.
    models: Vec<String>,
    /// One reservation at a time in this process: with SQLite the write lock would
    /// serialize them anyway, and with PostgreSQL it spares the row locks a queue.
    lock: tokio::sync::Mutex<()>,
}

/// A budget that applies to an answer, and the subject it is counted for.
struct Applied {
    budget: Budget,
    counted: String,
    period: String,
}

type BudgetRow = (String, String, String, Option<i64>, Option<i64>);

/// A reservation still open after this long belongs to a turn no gateway runs any
/// more (its replica crashed mid-turn; a live turn times out long before): it is
/// closed as spent in full, since the model may well have billed it.
const ABANDONED_AFTER: chrono::Duration = chrono::Duration::minutes(30);

impl DbBudgets {
    pub fn new(db: Db, prices: BTreeMap<String, Price>, models: Vec<String>) -> Self {
        Self {
            db,
            prices,
            models,
            lock: tokio::sync::Mutex::new(()),
        }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    fn price(&self, model: &str) -> Price {
        self.prices.get(model).copied().unwrap_or_default()
    }

    /// The worst case of a turn in money: the dearest model's price.
    fn worst_cost(&self, input: u64, output: u64) -> i64 {
        self.models
            .iter()
            .map(|m| self.price(m).cost_micros(input, output))
            .max()
            .unwrap_or(0)
    }

    /// The budgets that apply to the answer: the person's own (or the default for
    /// every person), each of their roles', and the conversation's own (or the
    /// default for every conversation).
    async fn applied(&self, ask: &BudgetAsk<'_>) -> Result<Vec<Applied>, sqlx::Error> {
        let rows: Vec<BudgetRow> = sqlx::query_as(
            "SELECT scope, subject, time_window, max_tokens, max_cost_micros FROM budgets ORDER BY scope, subject",
        )
        .fetch_all(self.db.pool())
        .await?;
        let budgets: Vec<Budget> = rows.into_iter().filter_map(budget_of).collect();
        let owner = ask.answer.owner.as_str();
        let conversation = ask.answer.conversation.as_str();
        let find = |scope: Scope, subject: &str| {
            budgets
                .iter()
                .find(|b| b.scope == scope && b.subject == subject)
                .cloned()
        };
        let mut applied = Vec::new();
        let now = Utc::now();
        let mut add = |budget: Budget, counted: &str| {
            let period = budget.window.period(now);
            applied.push(Applied {
                budget,
                counted: counted.to_owned(),
                period,
            });
        };
        if let Some(b) = find(Scope::Person, owner).or_else(|| find(Scope::Person, "*")) {
            add(b, owner);
        }
        // Each role once, in its budget's spelling (a token may name one in any case).
        let mut roles: Vec<String> = ask.roles.iter().map(|r| Scope::Role.subject(r)).collect();
        roles.sort();
        roles.dedup();
        for role in &roles {
            if let Some(b) = find(Scope::Role, role) {
                add(b, role);
            }
        }
        if let Some(b) =
            find(Scope::Conversation, conversation).or_else(|| find(Scope::Conversation, "*"))
        {
            add(b, conversation);
        }
        Ok(applied)
    }
}

/// What a budget has spent in a period: open reservations in full, closed ones as
/// settled.
async fn spent(
    tx: &mut sqlx::Transaction<'_, Any>,
    scope: &str,
    subject: &str,
    period: &str,
) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(CASE WHEN status = 'reserved' THEN reserved_tokens ELSE settled_tokens END), 0) AS BIGINT), \
                CAST(COALESCE(SUM(CASE WHEN status = 'reserved' THEN reserved_cost_micros ELSE settled_cost_micros END), 0) AS BIGINT) \
         FROM budget_ledger WHERE scope = $1 AND subject = $2 AND period = $3",
    )
    .bind(scope)
    .bind(subject)
    .bind(period)
    .fetch_one(&mut **tx)
    .await
}

fn budget_of((scope, subject, window, max_tokens, max_cost_micros): BudgetRow) -> Option<Budget> {
    Some(Budget {
        scope: Scope::parse(&scope)?,
        subject,
        window: Window::parse(&window)?,
        max_tokens,
        max_cost_micros,
    })
}

fn remaining(budget: &Budget, (tokens, cost): (i64, i64)) -> Remaining {
    Remaining {
        scope: budget.scope.as_str().to_owned(),
        window: budget.window.as_str().to_owned(),
        tokens: budget.max_tokens.map(|max| max - tokens),
        cost_micros: budget.max_cost_micros.map(|max| max - cost),
    }
}

/// How much of its cap is left, 0 to 1 (no cap: unbounded).
fn share_left(budget: &Budget, left: &Remaining) -> f64 {
    let share = |left: Option<i64>, max: Option<i64>| match (left, max) {
        (Some(left), Some(max)) if max > 0 => left as f64 / max as f64,
        (Some(_), Some(_)) => 0.0,
        _ => f64::INFINITY,
    };
    share(left.tokens, budget.max_tokens).min(share(left.cost_micros, budget.max_cost_micros))
}

/// The tightest of some budgets' remainders.
fn tightest(found: Vec<(Budget, Remaining)>) -> Option<Remaining> {
    found
        .into_iter()
        .min_by(|(a, left_a), (b, left_b)| share_left(a, left_a).total_cmp(&share_left(b, left_b)))
        .map(|(_, left)| left)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl Budgets for DbBudgets {
    async fn reserve(&self, ask: &BudgetAsk<'_>) -> StoreResult<Reserved> {
        let mut applied = self.applied(ask).await?;
        // One order for every transaction's row locks (a person's roles come in any
        // order), so two reservations never wait for each other in a circle.
        applied.sort_by(|a, b| {
            (a.budget.scope.as_str(), &a.budget.subject)
                .cmp(&(b.budget.scope.as_str(), &b.budget.subject))
        });
        if applied.is_empty() {
            return Ok(Reserved::Free);
        }
        let tokens = to_i64(ask.input_tokens.saturating_add(ask.output_tokens));
        let cost = self.worst_cost(ask.input_tokens, ask.output_tokens);
        let _one_at_a_time = self.lock.lock().await;
        let mut tx = self.db.begin_write().await?;
        if self.db.kind() == DbKind::Postgres {
            // Other replicas' reservations against these budgets wait here until
            // this one is written.
            for a in &applied {
                sqlx::query(
                    "SELECT scope FROM budgets WHERE scope = $1 AND subject = $2 FOR UPDATE",
                )
                .bind(a.budget.scope.as_str())
                .bind(&a.budget.subject)
                .fetch_optional(&mut *tx)
                .await?;
            }
        }
        let now = Utc::now();
        for a in &applied {
            let scope = a.budget.scope.as_str();
            // Only this budget's rows: its lock (above) covers them.
            sqlx::query(
                "UPDATE budget_ledger SET status = 'settled', settled_tokens = reserved_tokens, settled_cost_micros = reserved_cost_micros, \
                 refunded_tokens = 0, refunded_cost_micros = 0, settled_at = $1 \
                 WHERE scope = $2 AND subject = $3 AND status = 'reserved' AND created_at < $4",
            )
            .bind(canonical(now))
            .bind(scope)
            .bind(&a.counted)
            .bind(canonical(now - ABANDONED_AFTER))
            .execute(&mut *tx)
            .await?;
            let used = spent(&mut tx, scope, &a.counted, &a.period).await?;
            let left = remaining(&a.budget, used);
            let short = left.tokens.is_some_and(|n| n < tokens)
                || left.cost_micros.is_some_and(|n| n < cost);
            if short {
                tx.rollback().await?;
                return Ok(Reserved::Refused(left));
            }
        }
        let id = format!("rsv_{}", uuid::Uuid::now_v7().simple());
        let now = canonical(now);
        for a in &applied {
            sqlx::query(
                "INSERT INTO budget_ledger (id, reservation_id, scope, subject, period, message_id, model, status, reserved_tokens, reserved_cost_micros, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'reserved', $8, $9, $10)",
            )
            .bind(format!("led_{}", uuid::Uuid::now_v7().simple()))
            .bind(&id)
            .bind(a.budget.scope.as_str())
            .bind(&a.counted)
            .bind(&a.period)
            .bind(ask.answer.message.as_str())
            .bind(self.models.first().map_or("", String::as_str))
            .bind(tokens)
            .bind(cost)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Reserved::Held(Held { id }))
    }

    async fn settle(
        &self,
        held: &Held,
        model: &str,
        input_tokens: u64,
        output_tokens: u64,
    ) -> StoreResult<Option<Remaining>> {
        let tokens = to_i64(input_tokens.saturating_add(output_tokens));
        let cost = self.price(model).cost_micros(input_tokens, output_tokens);
        let mut tx = self.db.begin_write().await?;
        let rows: Vec<(String, String, String, String, i64, i64)> = sqlx::query_as(
            "SELECT id, scope, subject, period, reserved_tokens, reserved_cost_micros FROM budget_ledger \
             WHERE reservation_id = $1 AND status = 'reserved'",
        )
        .bind(&held.id)
        .fetch_all(&mut *tx)
        .await?;
        let now = canonical_now();
        let mut touched = Vec::new();
        for (id, scope, subject, period, reserved_tokens, reserved_cost) in rows {
            // The prompt estimate errs on the large side and the output is capped, so
            // a turn rarely uses more than it reserved; when it does, the row's
            // reservation is raised to what was used, so the ledger still adds up.
            if tokens > reserved_tokens || cost > reserved_cost {
                tracing::warn!(reservation = %held.id, tokens, reserved_tokens, "a model turn used more than it reserved");
            }
            let reserved_tokens = reserved_tokens.max(tokens);
            let reserved_cost = reserved_cost.max(cost);
            sqlx::query(
                "UPDATE budget_ledger SET status = 'settled', model = $2, reserved_tokens = $3, reserved_cost_micros = $4, \
                 settled_tokens = $5, settled_cost_micros = $6, refunded_tokens = $7, refunded_cost_micros = $8, settled_at = $9 \
                 WHERE id = $1",
            )
            .bind(&id)
            .bind(model)
            .bind(reserved_tokens)
            .bind(reserved_cost)
            .bind(tokens)
            .bind(cost)
            .bind(reserved_tokens - tokens)
            .bind(reserved_cost - cost)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
            touched.push((scope, subject, period));
        }
        let mut found = Vec::new();
        for (scope, subject, period) in touched {
            let row: Option<BudgetRow> = sqlx::query_as(
                "SELECT scope, subject, time_window, max_tokens, max_cost_micros FROM budgets \
                 WHERE scope = $1 AND subject IN ($2, '*') ORDER BY CASE WHEN subject = '*' THEN 1 ELSE 0 END",
            )
            .bind(&scope)
            .bind(&subject)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(budget) = row.and_then(budget_of) {
                let used = spent(&mut tx, &scope, &subject, &period).await?;
                let left = remaining(&budget, used);
                found.push((budget, left));
            }
        }
        tx.commit().await?;
        Ok(tightest(found))
    }
}
