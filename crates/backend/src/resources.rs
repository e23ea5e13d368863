//! Which JSON fields of each resource a client may filter and sort on, and the
//! column each one reads. Nothing outside these tables ever reaches SQL text.

use super::query::{Field, FieldType::*, Resource};

pub const CUSTOMERS: Resource = Resource {
    name: "customers",
    fields: &[
        Field {
            name: "_id",
            column: "c.id",
            ty: Text,
        },
        Field {
            name: "name",
            column: "c.name",
            ty: Text,
        },
        Field {
            name: "email",
            column: "c.email",
            ty: Text,
        },
        Field {
            name: "phone",
            column: "c.phone",
            ty: Text,
        },
        Field {
            name: "createdAt",
            column: "c.created_at",
            ty: DateTime,
        },
        Field {
            name: "lastBookingAt",
            column: "c.last_booking_at",
            ty: DateTime,
        },
        Field {
            name: "bookingCount",
            column: "c.booking_count",
            ty: Integer,
        },
        Field {
            name: "totalSpent",
            column: "c.total_spent",
            ty: Float,
        },
    ],
};

pub const FEEDBACK: Resource = Resource {
    name: "feedback",
    fields: &[
        Field {
            name: "_id",
            column: "f.id",
            ty: Text,
        },
        Field {
            name: "bookingId",
            column: "f.booking_id",
            ty: Text,
        },
        Field {
            name: "rating",
            column: "f.rating",
            ty: Integer,
        },
        Field {
            name: "comment",
            column: "f.comment",
            ty: Text,
        },
        Field {
            name: "createdAt",
            column: "f.created_at",
            ty: DateTime,
        },
        Field {
            name: "isPublic",
            column: "f.is_public",
            ty: Boolean,
        },
        Field {
            name: "customer._id",
            column: "f.customer_id",
            ty: Text,
        },
        Field {
            name: "customer.name",
            column: "c.name",
            ty: Text,
        },
        Field {
            name: "customer.email",
            column: "c.email",
            ty: Text,
        },
    ],
};

pub const BOOKINGS: Resource = Resource {
    name: "bookings",
    fields: &[
        Field {
            name: "_id",
            column: "b.id",
            ty: Text,
        },
        Field {
            name: "date",
            column: "b.date",
            ty: Date,
        },
        Field {
            name: "time",
            column: "b.time",
            ty: Time,
        },
        Field {
            name: "people",
            column: "b.people",
            ty: Integer,
        },
        Field {
            name: "duration",
            column: "b.duration",
            ty: Integer,
        },
        Field {
            name: "status",
            column: "b.status",
            ty: Text,
        },
        Field {
            name: "source",
            column: "b.source",
            ty: Text,
        },
        Field {
            name: "comment",
            column: "b.comment",
            ty: Text,
        },
        Field {
            name: "languageCode",
            column: "b.language_code",
            ty: Text,
        },
        Field {
            name: "openingHourId",
            column: "b.opening_hour_id",
            ty: Text,
        },
        Field {
            name: "createdAt",
            column: "b.created_at",
            ty: DateTime,
        },
        Field {
            name: "activityAt",
            column: "b.activity_at",
            ty: DateTime,
        },
        Field {
            name: "guest._id",
            column: "b.customer_id",
            ty: Text,
        },
        Field {
            name: "guest.name",
            column: "b.guest_name",
            ty: Text,
        },
        Field {
            name: "guest.email",
            column: "b.guest_email",
            ty: Text,
        },
        Field {
            name: "guest.phone",
            column: "b.guest_phone",
            ty: Text,
        },
    ],
};

pub const OPENING_HOURS: Resource = Resource {
    name: "opening-hours",
    fields: &[
        Field {
            name: "_id",
            column: "o.id",
            ty: Text,
        },
        Field {
            name: "name",
            column: "o.name",
            ty: Text,
        },
        Field {
            name: "date",
            column: "o.date",
            ty: Date,
        },
        Field {
            name: "opens",
            column: "o.opens",
            ty: Time,
        },
        Field {
            name: "closes",
            column: "o.closes",
            ty: Time,
        },
        Field {
            name: "isOpen",
            column: "o.is_open",
            ty: Boolean,
        },
        Field {
            name: "maxPeople",
            column: "o.max_people",
            ty: Integer,
        },
    ],
};

pub const TABLES: Resource = Resource {
    name: "tables",
    fields: &[
        Field {
            name: "_id",
            column: "t.id",
            ty: Text,
        },
        Field {
            name: "name",
            column: "t.name",
            ty: Text,
        },
        Field {
            name: "seatsMin",
            column: "t.seats_min",
            ty: Integer,
        },
        Field {
            name: "seatsMax",
            column: "t.seats_max",
            ty: Integer,
        },
        Field {
            name: "internalNote",
            column: "t.internal_note",
            ty: Text,
        },
        Field {
            name: "area._id",
            column: "a.id",
            ty: Text,
        },
        Field {
            name: "area.name",
            column: "a.name",
            ty: Text,
        },
    ],
};
