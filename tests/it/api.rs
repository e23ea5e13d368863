//! The resOS API's reads: authentication, audiences, scopes, filters, paging.

use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;

on_both_databases!(
    customers_need_a_token_and_there_are_at_least_fifty,
    custom_query_filters_like_the_data_says,
    hostile_filters_are_rejected_and_the_data_is_intact,
    paging_and_sorting_are_stable,
    every_resource_lists_and_reads_by_id,
);

async fn customers_need_a_token_and_there_are_at_least_fifty(db: &Database) {
    let app = TestApp::spawn(db).await;
    let anonymous = app
        .http
        .get(format!("{}/customers", app.api))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    let body: Value = anonymous.json().await.unwrap();
    assert_eq!(body["code"], "AUTHENTICATION_ERROR");

    let token = app.backend_token().await;
    let response = app.get("/customers", &token).await;
    assert_eq!(response.status(), 200);
    let total: i64 = response.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let customers: Vec<Value> = response.json().await.unwrap();
    assert!(customers.len() >= 50, "only {} customers", customers.len());
    assert_eq!(total, customers.len() as i64);
    assert!(
        customers
            .iter()
            .all(|c| c["_id"].is_string() && c["name"].is_string())
    );
    app.stop().await;
}

async fn custom_query_filters_like_the_data_says(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let all: Vec<Value> = serde_json::from_value(app.get_json("/customers", &token).await).unwrap();
    let expected: Vec<&str> = all
        .iter()
        .filter(|c| {
            c["email"]
                .as_str()
                .is_some_and(|e| e.ends_with("@example.com"))
                && c["bookingCount"].as_i64().unwrap() > 2
        })
        .map(|c| c["_id"].as_str().unwrap())
        .collect();
    assert!(
        !expected.is_empty(),
        "the demo data should have such customers"
    );
    assert!(expected.len() < all.len());

    let filtered: Vec<Value> = serde_json::from_value(
        app.http
            .get(format!("{}/customers", app.api))
            .query(&[(
                "customQuery",
                "email LIKE '%@example.com' AND bookingCount > 2",
            )])
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap(),
    )
    .unwrap();
    let mut got: Vec<&str> = filtered
        .iter()
        .map(|c| c["_id"].as_str().unwrap())
        .collect();
    let mut expected = expected;
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected);

    // OR, parentheses, IS NULL, dates and the resOS comma form on other resources.
    for (path, query) in [
        (
            "/customers",
            "(email IS NULL OR phone IS NULL) AND createdAt < 2100-01-01",
        ),
        ("/bookings", "people>1,duration>60"),
        ("/feedback", "rating >= 4 AND isPublic = true"),
        ("/feedback", "customer.email LIKE '%@example.com'"),
        ("/opening-hours", "isOpen = false OR maxPeople > 50"),
        ("/tables", "seatsMax >= 6 AND area.name = 'Private room'"),
    ] {
        let response = app
            .http
            .get(format!("{}{path}", app.api))
            .query(&[("customQuery", query)])
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            200,
            "{path} {query}: {}",
            response.text().await.unwrap()
        );
        let items: Vec<Value> = response.json().await.unwrap();
        assert!(!items.is_empty(), "{path} {query} matched nothing");
        for item in &items {
            let ok = match path {
                "/bookings" => {
                    item["people"].as_i64() > Some(1) && item["duration"].as_i64() > Some(60)
                }
                "/feedback" if query.starts_with("rating") => {
                    item["rating"].as_i64() >= Some(4) && item["isPublic"] == true
                }
                "/feedback" => item["customer"]["email"]
                    .as_str()
                    .unwrap()
                    .ends_with("@example.com"),
                "/opening-hours" => {
                    item["isOpen"] == false || item["maxPeople"].as_i64() > Some(50)
                }
                "/tables" => {
                    item["seatsMax"].as_i64() >= Some(6) && item["area"]["name"] == "Private room"
                }
                _ => item["email"].is_null() || item["phone"].is_null(),
            };
            assert!(ok, "{path} {query} returned {item}");
        }
    }
    app.stop().await;
}

async fn hostile_filters_are_rejected_and_the_data_is_intact(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let before = app
        .get_json("/customers", &token)
        .await
        .as_array()
        .unwrap()
        .len();
    for hostile in [
        "1=1; DROP TABLE customers",
        "name = 'x'; DROP TABLE customers; --",
        "name = 'unbalanced",
        "name = \"also unbalanced",
        "name = 'a' OR 1=1",
        "password = 'x'",
        "lower(name) = 'x'",
        "name = 'x' /* comment */",
        "name = 'x' -- comment",
        "name = (SELECT name FROM customers)",
        "name LIKE",
        "((((((((((((((((((name = 'x'))))))))))))))))))",
        "bookingCount > 'lots'",
        "name = x",
    ] {
        let response = app
            .http
            .get(format!("{}/customers", app.api))
            .query(&[("customQuery", hostile)])
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{hostile:?} was accepted");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "INVALID_REQUEST", "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.starts_with("customQuery: "), "{message}");
        assert!(message.len() > 40, "the message should explain: {message}");
    }
    let unknown = app
        .http
        .get(format!("{}/customers", app.api))
        .query(&[("customQuery", "password = 'x'")])
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert!(
        unknown["details"]["allowedFields"]
            .as_array()
            .unwrap()
            .contains(&json!("bookingCount"))
    );
    let after = app
        .get_json("/customers", &token)
        .await
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after);
    app.stop().await;
}

async fn paging_and_sorting_are_stable(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let sorted = app.get_json("/customers?sort=name:asc", &token).await;
    let names: Vec<&str> = sorted
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let mut expected = names.clone();
    expected.sort_unstable();
    // Byte order and collation agree on these ASCII-leading names' first letters.
    assert_eq!(
        names.iter().map(|n| n.chars().next()).collect::<Vec<_>>(),
        expected
            .iter()
            .map(|n| n.chars().next())
            .collect::<Vec<_>>()
    );
    let desc = app
        .get_json("/customers?sort=bookingCount:-1", &token)
        .await;
    let counts: Vec<i64> = desc
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["bookingCount"].as_i64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");

    let mut paged = Vec::new();
    for page in 0..4 {
        let items = app
            .get_json(
                &format!("/customers?sort=createdAt:desc&limit=20&skip={}", page * 20),
                &token,
            )
            .await;
        paged.extend(
            items
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["_id"].as_str().unwrap().to_owned()),
        );
    }
    let whole = app.get_json("/customers?sort=createdAt:desc", &token).await;
    let whole: Vec<String> = whole
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(paged, whole);

    for bad in [
        "limit=0",
        "limit=101",
        "skip=-1",
        "limit=abc",
        "sort=name:up",
        "sort=secret:asc",
    ] {
        let response = app.get(&format!("/customers?{bad}"), &token).await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "INVALID_REQUEST", "{bad}: {body}");
    }
    app.stop().await;
}

async fn every_resource_lists_and_reads_by_id(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    for (list, one) in [
        ("/customers", Some("/customers")),
        ("/feedback", Some("/feedback")),
        ("/opening-hours", Some("/opening-hours")),
        ("/bookings", Some("/bookings")),
        ("/tables", None),
    ] {
        let items = app.get_json(list, &token).await;
        let items = items.as_array().unwrap();
        assert!(!items.is_empty(), "{list} is empty");
        if let Some(one) = one {
            let id = items[0]["_id"].as_str().unwrap();
            let item = app.get_json(&format!("{one}/{id}"), &token).await;
            assert_eq!(item, items[0], "{one}/{id}");
        }
    }
    let tables = app.get_json("/tables", &token).await;
    let tables = tables.as_array().unwrap();
    assert!((18..=24).contains(&tables.len()), "{} tables", tables.len());
    assert!(tables.iter().all(|t| t["area"]["name"].is_string()));
    let feedback = app.get_json("/feedback", &token).await;
    let feedback = feedback.as_array().unwrap();
    assert!((50..=70).contains(&feedback.len()));
    assert!(
        feedback
            .iter()
            .all(|f| f["customer"]["_id"].is_string() && f["bookingId"].is_string())
    );

    let today = chrono::Utc::now().date_naive();
    let hours = app.get_json("/opening-hours", &token).await;
    for offset in 0..14 {
        let date = (today + chrono::Duration::days(offset))
            .format("%Y-%m-%d")
            .to_string();
        assert!(
            hours
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["date"] == date.as_str()),
            "no opening hours on {date}"
        );
    }
    let upcoming = app
        .get_json(
            &format!("/bookings?fromDateTime={today}&onlyConfirmed=true"),
            &token,
        )
        .await;
    let upcoming = upcoming.as_array().unwrap();
    assert!(
        upcoming.len() >= 20,
        "{} confirmed upcoming bookings",
        upcoming.len()
    );
    assert!(
        upcoming
            .iter()
            .all(|b| b["status"] == "approved" && b["tables"].as_array().unwrap().len() == 1)
    );

    let spec = app
        .http
        .get(format!("{}/api-docs/openapi.json", app.url))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    for path in [
        "/api/v1/resos/customers",
        "/api/v1/resos/bookings/{id}",
        "/api/v1/resos/bookings/available-times",
        "/api/v1/resos/bookings/{id}/restaurantNote",
    ] {
        assert!(
            spec["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    assert!(spec["components"]["schemas"]["Booking"].is_object());
    app.stop().await;
}
