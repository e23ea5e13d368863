-- Role budgets are keyed by the role's upper-case name (roles are compared without
-- regard to case, as the tool policy compares them). One written in another case
-- applied to nobody: it is renamed, one per name (the first), unless a budget of the
-- upper-case name exists, which wins; the others are removed, as the API could no
-- longer name them.
UPDATE budgets SET subject = UPPER(subject)
WHERE scope = 'role'
  AND subject <> UPPER(subject)
  AND NOT EXISTS (
    SELECT 1 FROM budgets AS other
    WHERE other.scope = 'role'
      AND UPPER(other.subject) = UPPER(budgets.subject)
      AND (other.subject = UPPER(other.subject) OR other.subject < budgets.subject)
  );
DELETE FROM budgets
WHERE scope = 'role' AND subject <> UPPER(subject);
