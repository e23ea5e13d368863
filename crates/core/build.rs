// `sqlx::migrate!` embeds the migrations at compile time; a new migration file must
// rebuild this crate even when no Rust file changed.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
