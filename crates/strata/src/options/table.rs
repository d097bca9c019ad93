//! The `options!` macro: each row of the options table (doc, name, type,
//! default, and optionally the accepted range and RocksDB's name for the
//! knob) becomes the `Options` field, its default, its builder setter, its
//! arm of [`Options::set`](super::Options::set) and
//! [`Options::get`](super::Options::get), its `name=value` pair in
//! `Display`, its range check in `validate`, and its row of
//! [`Options::TABLE`](super::Options::TABLE), from which the options
//! reference is rendered.

/// One option as the reference lists it.
#[derive(Debug, Clone, Copy)]
pub struct OptionInfo {
    pub name: &'static str,
    /// The field's Rust type.
    pub ty: &'static str,
    /// The field's doc comment, a line per line.
    pub doc: &'static str,
    /// RocksDB's name for the same knob, where it has one.
    pub rocksdb: Option<&'static str>,
    /// The values `validate` accepts, as the range's `Debug` (empty: any
    /// value of the type, or a rule `validate` states).
    pub range: &'static str,
}

/// Declares `Options` from its table: `text { rows }` are the options
/// that read and print as text, `other { rows }` the fields that do not
/// (the file layer, the listeners).
macro_rules! options {
    (
        text {
            $(
                $(#[doc = $doc:literal])*
                $name:ident : $ty:ty = $default:expr
                $(, range $range:expr)?
                $(, rocksdb $rocks:literal)? ;
            )*
        }
        other {
            $( $(#[doc = $odoc:literal])* $oname:ident : $oty:ty = $odefault:expr ; )*
        }
    ) => {
        /// Options of a database, fixed at open.
        #[derive(Clone)]
        pub struct Options {
            $( $(#[doc = $doc])* pub $name: $ty, )*
            $( $(#[doc = $odoc])* pub $oname: $oty, )*
        }

        impl Default for Options {
            fn default() -> Self {
                Options {
                    $( $name: $default, )*
                    $( $oname: $odefault, )*
                }
            }
        }

        impl Options {
            $(
                #[doc = concat!("Sets `", stringify!($name), "`.")]
                #[must_use]
                pub fn $name(mut self, v: $ty) -> Self {
                    self.$name = v;
                    self
                }
            )*

            /// Every option that reads and prints as text, in the order
            /// `Display` prints them.
            pub const TABLE: &'static [OptionInfo] = &[
                $(
                    OptionInfo {
                        name: stringify!($name),
                        ty: stringify!($ty),
                        doc: concat!($($doc, "\n",)*),
                        rocksdb: options!(@some $($rocks)?),
                        range: options!(@text $($range)?),
                    },
                )*
            ];

            /// Sets one option from its textual `name=value` form, as
            /// printed by `Display` (used by the command line, the C ABI
            /// and the benchmark). Sizes take `K`, `M` and `G` suffixes
            /// (powers of 1024); flags `true|on|1|false|off|0`.
            pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
                match name {
                    $(
                        stringify!($name) => {
                            self.$name = <$ty as OptionValue>::parse(value).map_err(|want| {
                                Error::InvalidArgument(format!(
                                    "option {name}: {value:?} is not {want}"
                                ))
                            })?;
                        }
                    )*
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "unknown option {name:?} (set to {value:?})"
                        )))
                    }
                }
                Ok(())
            }

            /// The value of option `name` as `set` reads it (`None`: no
            /// such option).
            pub fn get(&self, name: &str) -> Option<String> {
                match name {
                    $( stringify!($name) => Some(OptionValue::show(&self.$name)), )*
                    _ => None,
                }
            }

            /// Checks every option that has a range in the table against it.
            fn check_ranges(&self) -> Result<()> {
                $($(
                    let range = $range;
                    if !range.contains(&self.$name) {
                        return Err(Error::InvalidArgument(format!(
                            "option {}={} is outside {:?}",
                            stringify!($name),
                            OptionValue::show(&self.$name),
                            range
                        )));
                    }
                )?)*
                Ok(())
            }
        }

        impl fmt::Display for Options {
            /// Every option of the table as `name=value`, comma-separated
            /// (what [`Options::apply`] reads back).
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut sep = "";
                $(
                    write!(f, "{sep}{}={}", stringify!($name), OptionValue::show(&self.$name))?;
                    sep = ",";
                )*
                let _ = sep;
                Ok(())
            }
        }
    };
    (@some $rocks:literal) => { Some($rocks) };
    (@some) => { None };
    (@text $range:expr) => { stringify!($range) };
    (@text) => { "" };
}
