//! The list endpoints' shared parameters (`limit`, `skip`, `sort`, `customQuery`)
//! and the WHERE clause they build, fixed conditions and client filter alike bound
//! as parameters.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue};
use serde::Deserialize;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, FromRow};
use utoipa::IntoParams;

use super::error::ApiError;
use super::query::{self, BindValue, QueryError, Resource};
use crate::db::Db;

pub const MAX_LIMIT: i64 = 100;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Records to return, 1 to 100 (default 100).
    pub limit: Option<i64>,
    /// Records to skip (default 0).
    pub skip: Option<i64>,
    /// `field:asc|desc` (or resOS's `field:1|-1`), comma-separated for several keys.
    pub sort: Option<String>,
    /// A filter such as `email LIKE '%@example.com' AND bookingCount > 2`.
    pub custom_query: Option<String>,
}

/// A WHERE clause under construction; every value becomes a `$n` parameter.
#[derive(Debug, Default)]
pub struct Conditions {
    parts: Vec<String>,
    binds: Vec<BindValue>,
}

impl Conditions {
    /// `column_op` is trusted SQL such as `b.date >=`; the value is bound.
    pub fn add(&mut self, column_op: &'static str, value: BindValue) {
        self.binds.push(value);
        self.parts
            .push(format!("{column_op} ${}", self.binds.len()));
    }

    /// `column IN (…)` over trusted values.
    pub fn add_in(&mut self, column: &'static str, values: &[&str]) {
        let placeholders: Vec<String> = values
            .iter()
            .map(|v| {
                self.binds.push(BindValue::Text((*v).to_owned()));
                format!("${}", self.binds.len())
            })
            .collect();
        self.parts
            .push(format!("{column} IN ({})", placeholders.join(", ")));
    }

    pub fn add_filter(&mut self, input: &str, resource: &Resource) -> Result<(), ApiError> {
        if let Some(filter) = query::compile_filter(input, resource, self.binds.len() + 1)
            .map_err(|e| query_error("customQuery", e))?
        {
            self.parts.push(filter.sql);
            self.binds.extend(filter.binds);
        }
        Ok(())
    }

    pub fn where_clause(&self) -> String {
        if self.parts.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", self.parts.join(" AND "))
        }
    }

    pub fn binds(&self) -> &[BindValue] {
        &self.binds
    }
}

/// A list request resolved against a resource: filter, order and page.
pub struct ListQuery {
    pub conditions: Conditions,
    pub order_by: String,
    pub limit: i64,
    pub skip: i64,
}

impl ListParams {
    /// `default_order` and `tiebreaker` are trusted ORDER BY items.
    pub fn resolve(
        &self,
        resource: &Resource,
        mut conditions: Conditions,
        default_order: &str,
        tiebreaker: &str,
    ) -> Result<ListQuery, ApiError> {
        let limit = self.limit.unwrap_or(MAX_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::invalid(format!(
                "limit must be between 1 and {MAX_LIMIT}, not {limit}"
            )));
        }
        let skip = self.skip.unwrap_or(0);
        if skip < 0 {
            return Err(ApiError::invalid(format!(
                "skip must be 0 or more, not {skip}"
            )));
        }
        if let Some(filter) = &self.custom_query {
            conditions.add_filter(filter, resource)?;
        }
        let keys = match &self.sort {
            Some(sort) => query::parse_sort(sort, resource).map_err(|e| query_error("sort", e))?,
            None => Vec::new(),
        };
        let order_by = if keys.is_empty() {
            format!("ORDER BY {default_order}, {tiebreaker}")
        } else {
            query::order_by(&keys, tiebreaker)
        };
        Ok(ListQuery {
            conditions,
            order_by,
            limit,
            skip,
        })
    }
}

impl ListQuery {
    /// `SELECT {columns} {from} WHERE … ORDER BY … LIMIT … OFFSET …`
    pub fn page_sql(&self, columns: &str, from: &str) -> String {
        let n = self.conditions.binds().len();
        format!(
            "SELECT {columns} {from} {} {} LIMIT ${} OFFSET ${}",
            self.conditions.where_clause(),
            self.order_by,
            n + 1,
            n + 2
        )
    }

    pub fn count_sql(&self, from: &str) -> String {
        format!("SELECT COUNT(*) {from} {}", self.conditions.where_clause())
    }

    pub fn page_binds(&self) -> Vec<BindValue> {
        let mut binds = self.conditions.binds().to_vec();
        binds.push(BindValue::Int(self.limit));
        binds.push(BindValue::Int(self.skip));
        binds
    }
}

/// How one resource is read: its columns and tables, its filter whitelist, its order.
pub struct Listing {
    /// For "… not found" messages.
    pub name: &'static str,
    pub resource: &'static Resource,
    pub columns: &'static str,
    pub from: &'static str,
    pub id_column: &'static str,
    pub default_order: &'static str,
    /// The last ORDER BY item, unique, so pages never overlap.
    pub tiebreaker: &'static str,
}

impl Listing {
    /// A page of rows, and how many rows match the filter in all.
    pub async fn page<R>(
        &self,
        db: &Db,
        params: &ListParams,
        conditions: Conditions,
    ) -> Result<(i64, Vec<R>), ApiError>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let list = params.resolve(
            self.resource,
            conditions,
            self.default_order,
            self.tiebreaker,
        )?;
        let rows = bind_all(
            sqlx::query_as::<_, R>(sqlx::AssertSqlSafe(list.page_sql(self.columns, self.from))),
            &list.page_binds(),
        )
        .fetch_all(db.pool())
        .await?;
        let (total,): (i64,) = bind_all(
            sqlx::query_as(sqlx::AssertSqlSafe(list.count_sql(self.from))),
            list.conditions.binds(),
        )
        .fetch_one(db.pool())
        .await?;
        Ok((total, rows))
    }

    pub async fn one<R>(&self, db: &Db, id: &str) -> Result<R, ApiError>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        sqlx::query_as::<_, R>(sqlx::AssertSqlSafe(format!(
            "SELECT {} {} WHERE {} = $1",
            self.columns, self.from, self.id_column
        )))
        .bind(id)
        .fetch_optional(db.pool())
        .await?
        .ok_or_else(|| ApiError::not_found(self.name, id))
    }
}

/// A list response: the items, with the number matching in `X-Total-Count`.
pub fn with_total<T>(total: i64, items: T) -> (HeaderMap, Json<T>) {
    let mut headers = HeaderMap::new();
    headers.insert("x-total-count", HeaderValue::from(total));
    (headers, Json(items))
}

pub fn bind_all<'q, O>(
    mut query: sqlx::query::QueryAs<'q, Any, O, AnyArguments>,
    binds: &[BindValue],
) -> sqlx::query::QueryAs<'q, Any, O, AnyArguments> {
    for bind in binds {
        query = match bind {
            BindValue::Text(text) => query.bind(text.clone()),
            BindValue::Int(int) => query.bind(*int),
            BindValue::Float(float) => query.bind(*float),
        };
    }
    query
}

fn query_error(parameter: &str, error: QueryError) -> ApiError {
    let mut details = serde_json::json!({ "parameter": parameter });
    if let Some(position) = error.position {
        details["position"] = position.into();
    }
    if !error.allowed_fields.is_empty() {
        details["allowedFields"] = error.allowed_fields.clone().into();
    }
    details["allowedOperators"] = serde_json::json!([
        "=",
        "!=",
        ">",
        ">=",
        "<",
        "<=",
        "LIKE",
        "IS NULL",
        "IS NOT NULL"
    ]);
    ApiError::InvalidRequest {
        message: format!("{parameter}: {}", error.message),
        details: Some(details),
    }
}
