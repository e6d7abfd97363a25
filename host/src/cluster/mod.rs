pub mod command;
pub mod config;
pub mod controller;
pub mod image;
pub mod placement;
pub mod state_machine;
#[cfg(test)]
pub(crate) mod testing;
