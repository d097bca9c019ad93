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
    /// Where the value lives in `Options`: the name, or for a design's
    /// knob its group and field (`matrix.capacity`).
    pub field: &'static str,
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
/// that read and print as text; `designs { group: Struct { rows } }` are
/// text options too, each design's knobs nested in a struct of their own
/// (`opts.matrix.capacity`), a row naming the option users type before
/// `=>` (`matrix_capacity => capacity: ...`); `other { rows }` are the
/// fields that do not read as text (the file layer, the listeners).
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
        designs {
            $(
                $(#[doc = $gdoc:literal])*
                $group:ident : $gty:ident {
                    $(
                        $(#[doc = $fdoc:literal])*
                        $fname:ident => $field:ident : $fty:ty = $fdefault:expr
                        $(, range $frange:expr)?
                        $(, rocksdb $frocks:literal)? ;
                    )*
                }
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
            $( $(#[doc = $gdoc])* pub $group: $gty, )*
            $( $(#[doc = $odoc])* pub $oname: $oty, )*
        }

        $(
            $(#[doc = $gdoc])*
            #[derive(Debug, Clone, PartialEq)]
            pub struct $gty {
                $(
                    $(#[doc = $fdoc])*
                    #[doc = ""]
                    #[doc = concat!("Option `", stringify!($fname), "`.")]
                    pub $field: $fty,
                )*
            }

            impl Default for $gty {
                fn default() -> Self {
                    $gty {
                        $( $field: $fdefault, )*
                    }
                }
            }
        )*

        impl Default for Options {
            fn default() -> Self {
                Options {
                    $( $name: $default, )*
                    $( $group: $gty::default(), )*
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
            $($(
                #[doc = concat!("Sets `", stringify!($fname), "` (`", stringify!($group), ".", stringify!($field), "`).")]
                #[must_use]
                pub fn $fname(mut self, v: $fty) -> Self {
                    self.$group.$field = v;
                    self
                }
            )*)*

            /// Every option that reads and prints as text, in the order
            /// `Display` prints them.
            pub const TABLE: &'static [OptionInfo] = &[
                $(
                    OptionInfo {
                        name: stringify!($name),
                        field: stringify!($name),
                        ty: stringify!($ty),
                        doc: concat!($($doc, "\n",)*),
                        rocksdb: options!(@some $($rocks)?),
                        range: options!(@text $($range)?),
                    },
                )*
                $($(
                    OptionInfo {
                        name: stringify!($fname),
                        field: concat!(stringify!($group), ".", stringify!($field)),
                        ty: stringify!($fty),
                        doc: concat!($($fdoc, "\n",)*),
                        rocksdb: options!(@some $($frocks)?),
                        range: options!(@text $($frange)?),
                    },
                )*)*
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
                    $($(
                        stringify!($fname) => {
                            self.$group.$field = <$fty as OptionValue>::parse(value).map_err(|want| {
                                Error::InvalidArgument(format!(
                                    "option {name}: {value:?} is not {want}"
                                ))
                            })?;
                        }
                    )*)*
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
                    $($( stringify!($fname) => Some(OptionValue::show(&self.$group.$field)), )*)*
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
                $($($(
                    let range = $frange;
                    if !range.contains(&self.$group.$field) {
                        return Err(Error::InvalidArgument(format!(
                            "option {}={} is outside {:?}",
                            stringify!($fname),
                            OptionValue::show(&self.$group.$field),
                            range
                        )));
                    }
                )?)*)*
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
                $($(
                    write!(f, "{sep}{}={}", stringify!($fname), OptionValue::show(&self.$group.$field))?;
                    sep = ",";
                )*)*
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
