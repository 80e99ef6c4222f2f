//! [`Input`]: what every catalog converter reads. A leaf, so the converters and their CSV
//! reader can share it without importing the module that calls them.

/// The text of one source file and the name to use for it in error messages.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The file's name or path, as errors should show it.
    pub origin: &'a str,
    /// Its contents.
    pub text: &'a str,
}
