//! A restart keeps the signing keys, the credentials and every row.

use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;

on_both_databases!(tokens_and_data_survive_a_restart);

async fn tokens_and_data_survive_a_restart(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let secret = app.secret("maitred-cli");
    let date = chrono::Utc::now().date_naive() + chrono::Duration::days(2);
    let date = if chrono::Datelike::weekday(&date) == chrono::Weekday::Mon {
        date + chrono::Duration::days(1)
    } else {
        date
    };
    let times = app
        .get_json(
            &format!("/bookings/available-times?date={date}&people=2"),
            &token,
        )
        .await;
    let time = times[0].as_str().unwrap().to_owned();
    let created: Value = app
        .post_json(
            "/bookings",
            &token,
            &json!({ "date": date.to_string(), "time": time, "people": 2, "guest": { "name": "Persistent Pat" } }),
        )
        .await
        .json()
        .await
        .unwrap();
    let id = created["_id"].as_str().unwrap().to_owned();
    let customers_before = app
        .get_json("/customers", &token)
        .await
        .as_array()
        .unwrap()
        .len();

    let app = Box::pin(app.restart()).await;
    assert_eq!(app.secret("maitred-cli"), secret, "dev secrets are kept");
    let booking = app.get_json(&format!("/bookings/{id}"), &token).await;
    assert_eq!(booking["guest"]["name"], "Persistent Pat");
    let customers_after = app
        .get_json("/customers", &token)
        .await
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        customers_before, customers_after,
        "no reseeding over existing data"
    );
    app.stop().await;
}
