pub mod bootstrap;
pub mod get;
pub mod translate;
