//! Streamed rendering for `portcullis translate -o json|bootstrap`: the same
//! bytes as pretty-printing the whole document ([`super::output_to_json`],
//! [`super::static_bootstrap`]), written as they are rendered.
//!
//! The whole-document path holds every resource as a `serde_json::Value`
//! and then the whole text: at 10,000 routes that is hundreds of MB for a
//! 50 MB document. Here only one resource is a `Value` at a time (it must
//! be: map fields come out of `prost-reflect` in hash order and are sorted
//! in the `Value`), and its text goes straight to the writer, indented to
//! its place by [`Indented`]. Peak memory is the largest single resource,
//! not the document.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Value, json};

use super::OutputError;
use super::bootstrap::{BootstrapOptions, static_bootstrap_proto};
use super::json::{Resource, message_to_json};
use crate::{GatewayXds, Output};

/// serde_json's `PrettyFormatter` (two spaces), starting at a given depth, so
/// a value can be written in the middle of an enclosing pretty document.
struct Indented {
    depth: usize,
    has_value: bool,
}

impl Indented {
    fn at(depth: usize) -> Self {
        Self {
            depth,
            has_value: false,
        }
    }
}

fn indent<W: ?Sized + Write>(w: &mut W, depth: usize) -> io::Result<()> {
    for _ in 0..depth {
        w.write_all(b"  ")?;
    }
    Ok(())
}

impl serde_json::ser::Formatter for Indented {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            indent(w, self.depth)?;
        }
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        indent(w, self.depth)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            indent(w, self.depth)?;
        }
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        indent(w, self.depth)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// Writes `value` pretty-printed as if it sat at `depth` in a pretty document.
fn write_at<W: Write, T: Serialize + ?Sized>(w: &mut W, depth: usize, value: &T) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *w, Indented::at(depth));
    value.serialize(&mut ser).map_err(io::Error::other)
}

/// The pretty-printer's framing of one object or array, written by hand
/// around values written with [`write_at`].
struct Frame {
    depth: usize,
    first: bool,
}

impl Frame {
    fn open<W: Write>(w: &mut W, depth: usize, bracket: &[u8]) -> io::Result<Self> {
        w.write_all(bracket)?;
        Ok(Self {
            depth: depth + 1,
            first: true,
        })
    }
    /// Before the next member: `\n` or `,\n`, the indentation, and for an
    /// object member its `"key": `.
    fn next<W: Write>(&mut self, w: &mut W, key: Option<&str>) -> io::Result<()> {
        w.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        indent(w, self.depth)?;
        if let Some(key) = key {
            serde_json::to_writer(&mut *w, key).map_err(io::Error::other)?;
            w.write_all(b": ")?;
        }
        Ok(())
    }
    fn close<W: Write>(self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        if !self.first {
            w.write_all(b"\n")?;
            indent(w, self.depth - 1)?;
        }
        w.write_all(bracket)
    }
}

/// A message rendered without one of its fields (`rest`), written with that
/// field's value streamed in at its place by `value`: proto-JSON orders
/// fields by number, so it goes before the first key with a higher number.
/// `present: false` leaves it out (proto-JSON omits an empty list).
fn write_with_streamed_field<W: Write>(
    w: &mut W,
    depth: usize,
    type_name: &str,
    rest: &Value,
    field: &str,
    present: bool,
    mut value: impl FnMut(&mut W, usize) -> io::Result<()>,
) -> io::Result<()> {
    let Value::Object(rest) = rest else {
        return write_at(w, depth, rest);
    };
    let desc = super::json::descriptor_pool().get_message_by_name(type_name);
    let number = |key: &str| {
        desc.as_ref()
            .and_then(|d| d.get_field_by_name(key))
            .map_or(u32::MAX, |f| f.number())
    };
    let at = number(field);
    let mut f = Frame::open(w, depth, b"{")?;
    let mut placed = !present;
    for (key, v) in rest {
        if !placed && number(key) > at {
            f.next(w, Some(field))?;
            value(w, f.depth)?;
            placed = true;
        }
        f.next(w, Some(key))?;
        write_at(w, f.depth, v)?;
    }
    if !placed {
        f.next(w, Some(field))?;
        value(w, f.depth)?;
    }
    f.close(w, b"}")
}

use super::lazy::{RC_VIRTUAL_HOSTS, ROUTE, ROUTE_CONFIGURATION, VH_ROUTES, VIRTUAL_HOST, wire};
const BOOTSTRAP: &str = "envoy.config.bootstrap.v3.Bootstrap";

/// One message as canonical proto-JSON, pretty at `depth`, into `buf`
/// (cleared first): straight from its bytes ([`super::fast`]) where that
/// renders it exactly, else through the dynamic message and `Value`.
fn render_message(buf: &mut Vec<u8>, type_name: &str, bytes: &[u8], depth: usize) -> Result<(), OutputError> {
    buf.clear();
    if let Some(desc) = super::json::descriptor_pool().get_message_by_name(type_name) {
        if super::fast::message(buf, &desc, bytes, depth).is_ok() {
            return Ok(());
        }
        buf.clear();
    }
    let v = super::json::bytes_to_json(type_name, bytes)?;
    write_at(buf, depth, &v).map_err(|e| OutputError::Render(e.to_string()))
}

/// [`render_message`]'s fast path alone: `None` where it defers to the
/// general path. For tests that compare the two.
#[doc(hidden)]
pub fn fast_message_json(type_name: &str, bytes: &[u8], depth: usize) -> Option<String> {
    let desc = super::json::descriptor_pool().get_message_by_name(type_name)?;
    let mut buf = Vec::new();
    super::fast::message(&mut buf, &desc, bytes, depth).ok()?;
    String::from_utf8(buf).ok()
}

/// One route configuration, a virtual host's own fields and a route at a
/// time, walked on its bytes (`lazy::wire`): a configuration of 10,000
/// routes is most of a Gateway's output, and its `Value` alone is several
/// times the size of its text. Its own fields are rendered before anything
/// is written, so that they fail it whole (`@error`); a virtual host or a
/// route that cannot be rendered (an Any of a type the descriptor pool
/// lacks) is written as `{"@error": …}` in its place, which Envoy rejects,
/// and reported: unlike the whole-document path, the rest of its
/// configuration is already written. Falls back to the whole message when
/// its bytes cannot be walked (never for what the translator encodes).
fn write_route_configuration<W: Write>(
    w: &mut W,
    depth: usize,
    rc: &crate::xds::encoded::EncodedRouteConfiguration,
    buf: &mut Vec<u8>,
) -> Result<(), StreamError> {
    let bytes = rc.bytes();
    let split = wire::route_configuration_is_well_formed(bytes)
        .then(|| wire::split(bytes, RC_VIRTUAL_HOSTS))
        .flatten();
    let Some((envelope, hosts)) = split else {
        render_message(buf, ROUTE_CONFIGURATION, bytes, depth)?;
        w.write_all(buf)?;
        return Ok(());
    };
    let rest = super::json::bytes_to_json(ROUTE_CONFIGURATION, &envelope)?;
    let mut failed: Option<OutputError> = None;
    write_with_streamed_field(
        w,
        depth,
        ROUTE_CONFIGURATION,
        &rest,
        "virtual_hosts",
        hosts > 0,
        |w, d| {
            let mut list = Frame::open(w, d, b"[")?;
            for host in wire::children(bytes, RC_VIRTUAL_HOSTS) {
                list.next(w, None)?;
                // Checked by `route_configuration_is_well_formed`.
                let (own, routes) = wire::split(host, VH_ROUTES).unwrap_or_default();
                if write_fast_head(w, &own, list.depth, routes > 0, |w, d| {
                    write_routes(w, d, host, buf, &mut failed)
                })? {
                    continue;
                }
                let head = match super::json::bytes_to_json(VIRTUAL_HOST, &own) {
                    Ok(v) => v,
                    Err(e) => {
                        let v = json!({ "@error": e.to_string() });
                        failed.get_or_insert(e);
                        write_at(w, list.depth, &v)?;
                        continue;
                    }
                };
                write_with_streamed_field(
                    w,
                    list.depth,
                    VIRTUAL_HOST,
                    &head,
                    "routes",
                    routes > 0,
                    |w, d| write_routes(w, d, host, buf, &mut failed),
                )?;
            }
            list.close(w, b"]")
        },
    )?;
    if let Some(e) = failed {
        return Err(StreamError::Written(e));
    }
    Ok(())
}

/// A virtual host's routes, one at a time; one that cannot be rendered is
/// `{"@error": …}` in its place, its error kept in `failed`.
fn write_routes<W: Write>(
    w: &mut W,
    depth: usize,
    host: &[u8],
    buf: &mut Vec<u8>,
    failed: &mut Option<OutputError>,
) -> io::Result<()> {
    let mut rs = Frame::open(w, depth, b"[")?;
    for route in wire::children(host, VH_ROUTES) {
        rs.next(w, None)?;
        match render_message(buf, ROUTE, route, rs.depth) {
            Ok(()) => w.write_all(buf)?,
            Err(e) => {
                let v = json!({ "@error": e.to_string() });
                failed.get_or_insert(e);
                write_at(w, rs.depth, &v)?;
            }
        }
    }
    rs.close(w, b"]")
}

/// A virtual host's own fields (`own`, without its routes) rendered by the
/// fast path with `"routes"` written at its place by `routes`: the fields
/// numbered below `routes` and those above are rendered as two messages,
/// and their members joined around it (members are in number order, so
/// this is the text of the whole). `Ok(false)`, with nothing written,
/// when the fast path does not apply.
fn write_fast_head<W: Write>(
    w: &mut W,
    own: &[u8],
    depth: usize,
    present: bool,
    routes: impl FnOnce(&mut W, usize) -> io::Result<()>,
) -> io::Result<bool> {
    let Some(desc) = super::json::descriptor_pool().get_message_by_name(VIRTUAL_HOST) else {
        return Ok(false);
    };
    let (mut below, mut above) = (Vec::new(), Vec::new());
    for f in wire::fields(own) {
        let Ok(f) = f else { return Ok(false) };
        if f.number < VH_ROUTES {
            &mut below
        } else {
            &mut above
        }
        .extend_from_slice(f.whole);
    }
    let (mut b, mut a) = (Vec::new(), Vec::new());
    if super::fast::message(&mut b, &desc, &below, depth).is_err()
        || super::fast::message(&mut a, &desc, &above, depth).is_err()
    {
        return Ok(false);
    }
    // `{` members `\n<indent>}`, or `{}`: the members, each starting
    // with `\n` (the first) or `,\n`.
    let close = 2 * depth + 2;
    let body = |t: &[u8]| -> Vec<u8> {
        if t == b"{}" {
            Vec::new()
        } else {
            t[1..t.len() - close].to_vec()
        }
    };
    let (below, above) = (body(&b), body(&a));
    w.write_all(b"{")?;
    w.write_all(&below)?;
    let mut any = !below.is_empty();
    if present {
        w.write_all(if any { b",\n" } else { b"\n" })?;
        indent(w, depth + 1)?;
        w.write_all(b"\"routes\": ")?;
        routes(w, depth + 1)?;
        any = true;
    }
    if !above.is_empty() {
        if any {
            // Its first member now follows another one.
            w.write_all(b",")?;
        }
        w.write_all(&above)?;
        any = true;
    }
    if any {
        w.write_all(b"\n")?;
        indent(w, depth)?;
    }
    w.write_all(b"}")?;
    Ok(true)
}

/// One list of resources at `depth`; a resource that cannot be rendered is
/// written as `{"name": …, "@error": …}` and reported through `errors`, as
/// in the whole-document path.
fn write_list<W: Write, R: Resource>(
    w: &mut W,
    depth: usize,
    items: &[R],
    errors: &mut Vec<String>,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let mut f = Frame::open(w, depth, b"[")?;
    let type_name = R::type_name();
    for r in items {
        f.next(w, None)?;
        match render_message(buf, &type_name, &r.encoded(), f.depth) {
            Ok(()) => w.write_all(buf)?,
            Err(e) => {
                errors.push(super::json::render_error::<R>(r, &e));
                let v = json!({ "name": r.resource_name(), "@error": e.to_string() });
                write_at(w, f.depth, &v)?;
            }
        }
    }
    f.close(w, b"]")
}

fn write_gateway<W: Write>(
    w: &mut W,
    depth: usize,
    gw: &GatewayXds,
    errors: &mut Vec<String>,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let mut f = Frame::open(w, depth, b"{")?;
    f.next(w, Some("listeners"))?;
    write_list(w, f.depth, &gw.listeners, errors, buf)?;
    f.next(w, Some("routes"))?;
    let mut list = Frame::open(w, f.depth, b"[")?;
    for rc in &gw.routes {
        list.next(w, None)?;
        match write_route_configuration(w, list.depth, rc, buf) {
            Ok(()) => {}
            Err(StreamError::Io(e)) => return Err(e),
            Err(StreamError::Written(e)) => errors.push(super::json::render_error(rc, &e)),
            Err(StreamError::Render(e)) => {
                errors.push(super::json::render_error(rc, &e));
                write_at(
                    w,
                    list.depth,
                    &json!({ "name": rc.name, "@error": e.to_string() }),
                )?;
            }
        }
    }
    list.close(w, b"]")?;
    f.next(w, Some("clusters"))?;
    write_list(w, f.depth, &gw.clusters, errors, buf)?;
    f.next(w, Some("endpoints"))?;
    write_list(w, f.depth, &gw.endpoints, errors, buf)?;
    f.next(w, Some("secrets"))?;
    write_list(w, f.depth, &gw.secrets, errors, buf)?;
    f.close(w, b"}")
}

/// The design §5 document, byte for byte what pretty-printing
/// [`super::output_to_json`] gives (with its trailing newline), written
/// as it renders.
pub fn write_output_json<W: Write>(out: &Output, w: &mut W) -> io::Result<()> {
    let mut errors: Vec<(String, String)> = Vec::new();
    // One resource's (or route's) text at a time.
    let mut buf = Vec::new();
    let mut doc = Frame::open(w, 0, b"{")?;
    doc.next(w, Some("gateways"))?;
    let mut gws = Frame::open(w, doc.depth, b"{")?;
    for (key, gw) in &out.gateways {
        gws.next(w, Some(key))?;
        let mut errs = Vec::new();
        write_gateway(w, gws.depth, gw, &mut errs, &mut buf)?;
        errors.extend(errs.into_iter().map(|e| (key.clone(), e)));
    }
    gws.close(w, b"}")?;
    doc.next(w, Some("status"))?;
    write_at(w, doc.depth, &out.timed_status())?;
    doc.next(w, Some("diagnostics"))?;
    let mut diags = Frame::open(w, doc.depth, b"[")?;
    for d in &out.diagnostics {
        diags.next(w, None)?;
        write_at(w, diags.depth, d)?;
    }
    for (key, e) in errors {
        diags.next(w, None)?;
        let v = json!({ "severity": "error", "object": format!("Gateway {key}"), "message": e });
        write_at(w, diags.depth, &v)?;
    }
    diags.close(w, b"]")?;
    doc.close(w, b"}")?;
    w.write_all(b"\n")
}

/// The design §5 document as YAML, byte for byte what
/// [`super::output_to_yaml`] gives, written as it renders: the same
/// serializer (serde-saphyr, same options) is driven by the same calls as
/// for the whole `Value`, with each resource rendered only when reached
/// (see `lazy.rs`). Fails only when writing fails (or the serializer
/// refuses a value, which it does not for JSON values).
pub fn write_output_yaml<W: Write>(out: &Output, w: &mut W) -> io::Result<()> {
    let doc = super::lazy::Document::new(out);
    serde_saphyr::to_io_writer_with_options(w, &doc, super::json::yaml_options()).map_err(|e| match e {
        serde_saphyr::ser::Error::IO { error } => error,
        other => io::Error::other(other.to_string()),
    })
}

/// A static bootstrap of one Gateway ([`super::static_bootstrap`]), byte
/// for byte what pretty-printing it gives (with a trailing newline), with
/// `static_resources` written one resource at a time.
pub fn write_static_bootstrap<W: Write>(
    gw: &GatewayXds,
    node_id: &str,
    options: &BootstrapOptions,
    w: &mut W,
) -> Result<(), StreamError> {
    let mut proto = static_bootstrap_proto(gw, node_id, options);
    let resources = proto.static_resources.take().unwrap_or_default();
    // Everything but the resources is small: render it whole, and stream
    // `static_resources` in at its place.
    let rest = message_to_json(&proto)?;
    let mut errors = Vec::new();
    let mut buf = Vec::new();
    write_with_streamed_field(w, 0, BOOTSTRAP, &rest, "static_resources", true, |w, d| {
        let mut f = Frame::open(w, d, b"{")?;
        if !resources.listeners.is_empty() {
            f.next(w, Some("listeners"))?;
            write_list(w, f.depth, &resources.listeners, &mut errors, &mut buf)?;
        }
        if !resources.clusters.is_empty() {
            f.next(w, Some("clusters"))?;
            write_list(w, f.depth, &resources.clusters, &mut errors, &mut buf)?;
        }
        if !resources.secrets.is_empty() {
            f.next(w, Some("secrets"))?;
            write_list(w, f.depth, &resources.secrets, &mut errors, &mut buf)?;
        }
        f.close(w, b"}")
    })?;
    w.write_all(b"\n")?;
    match errors.into_iter().next() {
        None => Ok(()),
        Some(e) => Err(StreamError::Render(OutputError::Render(e))),
    }
}

/// Why a streamed rendering stopped or is incomplete.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("cannot write the output: {0}")]
    Io(#[from] io::Error),
    /// Written, but a resource could not be rendered (it appears as
    /// `{"name": …, "@error": …}`, which Envoy rejects).
    #[error("{0}")]
    Render(#[from] OutputError),
    /// A part could not be rendered and was written as `{"@error": …}`.
    #[error("{0}")]
    Written(OutputError),
}
