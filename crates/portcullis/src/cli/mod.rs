pub mod bootstrap;
pub mod get;
pub mod offline;
pub mod translate;
