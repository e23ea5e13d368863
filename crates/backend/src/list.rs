//! The list endpoints' shared parameters (`limit`, `skip`, `sort`, `customQuery`)
//! and the WHERE clause they build, fixed conditions and client filter alike bound
//! as parameters.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue};
use serde::Deserialize;
use sqlx::FromRow;
use sqlx::any::AnyRow;
use utoipa::IntoParams;

use super::error::ApiError;
use super::query::{self, BindValue, QueryError, Resource};
use super::sql::Sql;
use maitred_core::db::Db;

pub(super) const MAX_LIMIT: i64 = 100;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct ListParams {
    /// Records to return, 1 to 100 (default 100).
    pub limit: Option<i64>,
    /// Records to skip (default 0).
    pub skip: Option<i64>,
    /// `field:asc|desc` (or resOS's `field:1|-1`), comma-separated for several keys.
    pub sort: Option<String>,
    /// A filter such as `email LIKE '%@example.com' AND bookingCount > 2`.
    pub custom_query: Option<String>,
}

/// A WHERE clause under construction; every value is bound, numbered by [`Sql`].
#[derive(Debug, Default)]
pub(super) struct Conditions {
    sql: Sql,
}

impl Conditions {
    fn next(&mut self) -> &mut Sql {
        let separator = if self.sql.is_empty() {
            "WHERE "
        } else {
            " AND "
        };
        self.sql.push(separator)
    }

    /// `column_op` is trusted SQL such as `b.date >=`; the value is bound.
    pub(super) fn add(&mut self, column_op: &'static str, value: BindValue) {
        self.next().push(column_op).push(" ").push_bind(value);
    }

    /// `column IN (…)` over trusted values.
    pub(super) fn add_in(&mut self, column: &'static str, values: &[&str]) {
        self.next()
            .push(column)
            .push(" IN ")
            .push_list(values.iter().map(|v| BindValue::Text((*v).to_owned())));
    }

    pub(super) fn add_filter(&mut self, input: &str, resource: &Resource) -> Result<(), ApiError> {
        // The filter's placeholders continue this clause's: numbered from the builder.
        if let Some(filter) = query::compile_filter(input, resource, self.sql.next_placeholder())
            .map_err(|e| query_error("customQuery", e))?
        {
            self.next().push_numbered(&filter.sql, filter.binds);
        }
        Ok(())
    }
}

/// A list request resolved against a resource: filter, order and page.
pub(super) struct ListQuery {
    pub conditions: Conditions,
    pub order_by: String,
    pub limit: i64,
    pub skip: i64,
}

impl ListParams {
    /// `default_order` and `tiebreaker` are trusted ORDER BY items.
    pub(super) fn resolve(
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
    fn page_sql(&self, columns: &str, from: &str) -> Sql {
        let mut sql = Sql::prefixed(&format!("SELECT {columns} {from} "), &self.conditions.sql);
        sql.push(" ")
            .push(&self.order_by)
            .push(" LIMIT ")
            .push_bind(BindValue::Int(self.limit))
            .push(" OFFSET ")
            .push_bind(BindValue::Int(self.skip));
        sql
    }

    fn count_sql(&self, from: &str) -> Sql {
        Sql::prefixed(&format!("SELECT COUNT(*) {from} "), &self.conditions.sql)
    }
}

/// How one resource is read: its columns and tables, its filter whitelist, its order.
pub(super) struct Listing {
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
    pub(super) async fn page<R>(
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
        let rows = list
            .page_sql(self.columns, self.from)
            .query_as::<R>()
            .fetch_all(db.pool())
            .await?;
        let (total,): (i64,) = list
            .count_sql(self.from)
            .query_as()
            .fetch_one(db.pool())
            .await?;
        Ok((total, rows))
    }

    pub(super) async fn one<R>(&self, db: &Db, id: &str) -> Result<R, ApiError>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let mut sql = Sql::new(format!(
            "SELECT {} {} WHERE {} = ",
            self.columns, self.from, self.id_column
        ));
        sql.push_bind(BindValue::Text(id.to_owned()));
        sql.query_as::<R>()
            .fetch_optional(db.pool())
            .await?
            .ok_or_else(|| ApiError::not_found(self.name, id))
    }
}

impl Listing {
    /// The whole read path of `GET /{resource}`: a page of rows `R` as models `M`,
    /// with the number matching in `X-Total-Count`.
    pub(super) async fn list<R, M>(&self, db: &Db, params: &ListParams) -> ListResponse<M>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin + Into<M>,
    {
        let (total, rows) = self.page::<R>(db, params, Conditions::default()).await?;
        Ok(with_total(total, rows.into_iter().map(R::into).collect()))
    }

    /// The whole read path of `GET /{resource}/{id}`: row `R` as model `M`, or a 404.
    pub(super) async fn get<R, M>(&self, db: &Db, id: &str) -> Result<Json<M>, ApiError>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin + Into<M>,
    {
        Ok(Json(self.one::<R>(db, id).await?.into()))
    }
}

/// The read endpoints of a resource that one [`Listing`], `LISTING` in the calling
/// module, reads as rows `$row` answered as models `$model`: `list`, `GET $path` (one
/// page, with `X-Total-Count`), and, given its path, `get`, `GET $item_path` (one by
/// id, or a 404). Each with its OpenAPI description; `$extra` adds responses to the
/// list's. Both need a token with `backend.read`.
macro_rules! read_endpoints {
    (
        tag: $tag:literal,
        model: $model:ident,
        row: $row:ident,
        list: ($path:literal, $list_summary:literal, $listed:literal $(, $extra:tt)* $(,)?)
        $(, get: ($item_path:literal, $get_summary:literal, $id:literal, $not_found:literal $(,)?))?
        $(,)?
    ) => {
        #[doc = $list_summary]
        #[utoipa::path(get, path = $path, tag = $tag,
            params(crate::list::ListParams),
            responses(
                (status = 200, description = $listed, body = [$model]),
                (status = 400, description = "Invalid limit, sort or customQuery", body = crate::ErrorBody),
                $($extra,)*
            ),
            security(("bearer" = ["backend.read"])))]
        pub(super) async fn list(
            _auth: crate::Reader,
            axum::extract::State(state): axum::extract::State<crate::BackendState>,
            crate::extract::ApiQuery(params): crate::extract::ApiQuery<crate::list::ListParams>,
        ) -> crate::list::ListResponse<$model> {
            LISTING.list::<$row, _>(&state.db, &params).await
        }

        $(
            #[doc = $get_summary]
            #[utoipa::path(get, path = $item_path, tag = $tag,
                params(("id" = String, Path, description = $id)),
                responses(
                    (status = 200, body = $model),
                    (status = 404, description = $not_found, body = crate::ErrorBody),
                ),
                security(("bearer" = ["backend.read"])))]
            pub(super) async fn get(
                _auth: crate::Reader,
                axum::extract::State(state): axum::extract::State<crate::BackendState>,
                axum::extract::Path(id): axum::extract::Path<String>,
            ) -> Result<crate::Json<$model>, crate::error::ApiError> {
                LISTING.get::<$row, _>(&state.db, &id).await
            }
        )?
    };
}
pub(crate) use read_endpoints;

/// What a list endpoint answers.
pub(super) type ListResponse<M> = Result<(HeaderMap, Json<Vec<M>>), ApiError>;

/// A list response: the items, with the number matching in `X-Total-Count`.
pub(super) fn with_total<T>(total: i64, items: T) -> (HeaderMap, Json<T>) {
    let mut headers = HeaderMap::new();
    headers.insert("x-total-count", HeaderValue::from(total));
    (headers, Json(items))
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
