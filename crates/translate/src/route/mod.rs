//! Routes: the common model of every route kind, matches, filters, and the
//! rule builder.

pub mod filters;
pub mod matches;
pub mod model;
pub mod rule;
