//! Writing bookings: assignment, availability, concurrency, lifecycle, notes.

use chrono::{Datelike, Duration, NaiveDate, Utc, Weekday};
use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;

on_both_databases!(
    twenty_concurrent_bookings_of_one_table_one_wins,
    a_booking_gets_the_smallest_free_table_and_lives_its_life,
    availability_honours_opening_hours_and_taken_tables,
    a_read_only_token_cannot_write,
);

/// A future open day (not Monday, not today) some days ahead.
fn open_day(days_ahead: i64) -> NaiveDate {
    let mut date = Utc::now().date_naive() + Duration::days(days_ahead);
    if date.weekday() == Weekday::Mon {
        date += Duration::days(1);
    }
    date
}

fn guest(name: &str) -> Value {
    json!({ "name": name, "email": format!("{}@example.net", name.to_lowercase().replace(' ', ".")), "phone": "+4512345678" })
}

/// A table seating `people` and a time it is free on `date`.
async fn free_table(app: &TestApp, token: &str, date: NaiveDate, people: i64) -> (String, String) {
    let tables = app
        .get_json(
            &format!("/tables?customQuery=seatsMin <= {people} AND seatsMax >= {people}"),
            token,
        )
        .await;
    let bookings = app
        .get_json(
            &format!("/bookings?fromDateTime={date}&toDateTime={date}"),
            token,
        )
        .await;
    for table in tables.as_array().unwrap() {
        let id = table["_id"].as_str().unwrap();
        let busy = bookings.as_array().unwrap().iter().any(|b| {
            b["tables"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["_id"] == id)
        });
        if !busy {
            return (id.to_owned(), "19:00".to_owned());
        }
    }
    panic!("no table for {people} is free all day on {date}");
}

async fn twenty_concurrent_bookings_of_one_table_one_wins(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let date = open_day(4);
    let (table, time) = free_table(&app, &token, date, 2).await;
    let attempts = (0..20).map(|i| {
        let body = json!({
            "date": date.to_string(), "time": time, "people": 2,
            "guest": guest(&format!("Racer {i}")), "tables": [table],
        });
        let app = &app;
        let token = &token;
        async move { app.post_json("/bookings", token, &body).await }
    });
    let responses = futures::future::join_all(attempts).await;
    let mut statuses: Vec<u16> = Vec::new();
    for response in responses {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        if status == 409 {
            assert_eq!(body["code"], "CONFLICT", "{body}");
        } else {
            assert_eq!(status, 200, "{body}");
        }
        statuses.push(status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        19,
        "{statuses:?}"
    );

    let held = app
        .get_json(&format!("/bookings?fromDateTime={date}&toDateTime={date}&customQuery=guest.name LIKE 'Racer%'"), &token)
        .await;
    assert_eq!(held.as_array().unwrap().len(), 1);
    app.stop().await;
}

async fn a_booking_gets_the_smallest_free_table_and_lives_its_life(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let date = open_day(5);
    let times = app
        .get_json(
            &format!("/bookings/available-times?date={date}&people=3&duration=120"),
            &token,
        )
        .await;
    let time = times
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let response = app
        .post_json(
            "/bookings",
            &token,
            &json!({
                "date": date.to_string(), "time": time, "people": 3, "duration": 120,
                "guest": guest("Trinity Moss"), "comment": "Quiet corner please",
                "metadata": { "occasion": "birthday" }, "source": "phone",
            }),
        )
        .await;
    assert_eq!(response.status(), 200);
    let booking: Value = response.json().await.unwrap();
    let id = booking["_id"].as_str().unwrap().to_owned();
    assert_eq!(booking["status"], "request");
    assert_eq!(booking["duration"], 120);
    assert_eq!(booking["metadata"]["occasion"], "birthday");
    let tables = booking["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 1);
    let seats_max = tables[0]["seatsMax"].as_i64().unwrap();
    assert!(seats_max >= 3 && tables[0]["seatsMin"].as_i64().unwrap() <= 3);
    // The smallest fitting size: no table that seats 3 is smaller.
    let all = app
        .get_json(
            "/tables?customQuery=seatsMin <= 3 AND seatsMax >= 3",
            &token,
        )
        .await;
    let smallest = all
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seatsMax"].as_i64().unwrap())
        .min()
        .unwrap();
    assert_eq!(seats_max, smallest);

    // The guest became (or matched) a customer.
    let customer_id = booking["guest"]["_id"].as_str().unwrap();
    let customer = app
        .get_json(&format!("/customers/{customer_id}"), &token)
        .await;
    assert_eq!(customer["email"], "trinity.moss@example.net");
    assert_eq!(customer["bookingCount"], 1);

    // Lifecycle: approve, a forbidden jump, arrive, seat, and the table is freed on leaving.
    for (status, expected) in [
        ("approved", 200),
        ("left", 409),
        ("arrived", 200),
        ("seated", 200),
    ] {
        let response = app
            .put_json(
                &format!("/bookings/{id}"),
                &token,
                &json!({ "status": status }),
            )
            .await;
        let code = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        assert_eq!(code, expected, "{status}: {body}");
        if expected == 200 {
            assert_eq!(body, json!(true));
        } else {
            assert_eq!(body["code"], "CONFLICT");
            assert!(
                body["message"].as_str().unwrap().contains("allowed"),
                "{body}"
            );
        }
    }
    let comment = app
        .post_json(
            &format!("/bookings/{id}/comment"),
            &token,
            &json!({ "text": "Cake at 21:00" }),
        )
        .await;
    assert_eq!(comment.status(), 200);
    assert!(comment.json::<Value>().await.unwrap().is_string());
    let note = app
        .post_json(
            &format!("/bookings/{id}/restaurantNote"),
            &token,
            &json!({ "text": "Regular, knows the chef" }),
        )
        .await;
    assert_eq!(note.status(), 200);
    let empty = app
        .post_json(
            &format!("/bookings/{id}/comment"),
            &token,
            &json!({ "text": "  " }),
        )
        .await;
    assert_eq!(empty.status(), 400);
    let missing = app
        .post_json(
            "/bookings/000000000000000000000000/comment",
            &token,
            &json!({ "text": "hi" }),
        )
        .await;
    assert_eq!(missing.status(), 404);

    let stored = app.get_json(&format!("/bookings/{id}"), &token).await;
    assert_eq!(stored["status"], "seated");
    assert_eq!(stored["comments"], json!(["Cake at 21:00"]));
    assert_eq!(stored["note"], "Regular, knows the chef");
    assert_eq!(stored["noteAuthor"], "maitred-mcp");
    assert_eq!(stored["comment"], "Quiet corner please");

    let left = app
        .put_json(
            &format!("/bookings/{id}"),
            &token,
            &json!({ "status": "left" }),
        )
        .await;
    assert_eq!(left.status(), 200);
    let stored = app.get_json(&format!("/bookings/{id}"), &token).await;
    assert_eq!(stored["tables"], json!([]), "leaving frees the table");
    app.stop().await;
}

async fn availability_honours_opening_hours_and_taken_tables(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let date = open_day(6);

    let closed = app
        .post_json("/bookings", &token, &json!({ "date": date.to_string(), "time": "09:00", "people": 2, "guest": guest("Early Bird") }))
        .await;
    assert_eq!(closed.status(), 422);
    let body: Value = closed.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("not open"),
        "{body}"
    );
    assert!(
        !body["details"]["nearestTimes"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Ending after closing time is refused too (dinner closes at 23:00).
    let late = app
        .post_json("/bookings", &token, &json!({ "date": date.to_string(), "time": "22:00", "people": 2, "guest": guest("Night Owl") }))
        .await;
    assert_eq!(late.status(), 422);

    let mut monday = date;
    while monday.weekday() != Weekday::Mon {
        monday += Duration::days(1);
    }
    let monday_times = app
        .get_json(
            &format!("/bookings/available-times?date={monday}&people=2"),
            &token,
        )
        .await;
    assert_eq!(monday_times, json!([]), "closed on Mondays");
    let dates = app.get_json("/bookings/available-dates", &token).await;
    let dates: Vec<&str> = dates
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(dates.contains(&date.to_string().as_str()));
    assert!(!dates.contains(&monday.to_string().as_str()));

    // Occupy every table for 9 at 19:00, then that time is gone for 9. Demo
    // bookings on those tables that day are cancelled first.
    let big = app
        .get_json(
            "/tables?customQuery=seatsMin <= 9 AND seatsMax >= 9",
            &token,
        )
        .await;
    let that_day = app
        .get_json(
            &format!("/bookings?fromDateTime={date}&toDateTime={date}"),
            &token,
        )
        .await;
    for booking in that_day.as_array().unwrap() {
        let on_big_table = booking["tables"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| big.as_array().unwrap().iter().any(|b| b["_id"] == t["_id"]));
        if on_big_table {
            let id = booking["_id"].as_str().unwrap();
            let response = app
                .put_json(
                    &format!("/bookings/{id}"),
                    &token,
                    &json!({ "status": "canceled" }),
                )
                .await;
            assert_eq!(response.status(), 200);
        }
    }
    let before = app
        .get_json(
            &format!("/bookings/available-times?date={date}&people=9"),
            &token,
        )
        .await;
    assert!(
        before.as_array().unwrap().contains(&json!("19:00")),
        "{before}"
    );
    for table in big.as_array().unwrap() {
        let response = app
            .post_json(
                "/bookings",
                &token,
                &json!({
                    "date": date.to_string(), "time": "19:00", "people": 9,
                    "guest": guest("Big Party"), "tables": [table["_id"]],
                }),
            )
            .await;
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    }
    let after = app
        .get_json(
            &format!("/bookings/available-times?date={date}&people=9"),
            &token,
        )
        .await;
    let after: Vec<&str> = after
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for taken in ["17:45", "18:00", "19:00", "20:15"] {
        assert!(
            !after.contains(&taken),
            "{taken} is still offered: {after:?}"
        );
    }
    assert!(
        after.contains(&"20:30"),
        "the table is free again after 90 minutes: {after:?}"
    );

    let full = app
        .post_json("/bookings", &token, &json!({ "date": date.to_string(), "time": "19:00", "people": 9, "guest": guest("Late Party") }))
        .await;
    assert_eq!(full.status(), 409);
    let body: Value = full.json().await.unwrap();
    let nearest = body["details"]["nearestTimes"].as_array().unwrap();
    assert!(!nearest.is_empty(), "{body}");
    assert!(
        nearest.iter().all(|t| after.contains(&t.as_str().unwrap())),
        "{body}"
    );
    app.stop().await;
}

async fn a_read_only_token_cannot_write(db: &Database) {
    let app = TestApp::spawn(db).await;
    let reader = app.token("maitred-mcp", &[("scope", "backend.read")]).await;
    let date = open_day(3);
    let response = app
        .post_json("/bookings", &reader, &json!({ "date": date.to_string(), "time": "19:00", "people": 2, "guest": guest("Read Only") }))
        .await;
    assert_eq!(response.status(), 403);
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"backend.write\""), "{challenge}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "AUTHORIZATION_ERROR");
    // Reading still works with the same token.
    assert_eq!(app.get("/customers?limit=1", &reader).await.status(), 200);
    let bookings = app.get_json(&format!("/bookings?fromDateTime={date}&toDateTime={date}&customQuery=guest.name = 'Read Only'"), &reader).await;
    assert_eq!(bookings, json!([]));
    app.stop().await;
}
