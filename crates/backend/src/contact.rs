//! What the reservation system accepts as a guest's email address and phone number,
//! shared by the backend's validation and the MCP role's check of a form's answers.

/// A plain `local@domain.tld` address, without quoting or comments.
pub fn valid_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && email.len() <= 254
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._%+-".contains(c))
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}

/// An E.164 number (`+` and 7 to 15 digits, no leading zero).
pub fn valid_e164(phone: &str) -> bool {
    let Some(digits) = phone.strip_prefix('+') else {
        return false;
    };
    (7..=15).contains(&digits.len())
        && digits.chars().all(|c| c.is_ascii_digit())
        && !digits.starts_with('0')
}

/// A phone number as people type it, without the spaces, dashes and brackets.
pub fn compact_phone(phone: &str) -> String {
    phone
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '(' | ')'))
        .collect()
}
