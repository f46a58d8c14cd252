// The SOp -> WGSL table of the compute emitter (wgsl_math.h), formula for formula beside glsl_math.cpp.
#include "wgsl_math.h"

#include <fmt/format.h>

namespace sg {

std::string wgsl_math(SOp op, const std::string& a, const std::string& b, const std::string& c) {
  switch (op) {
    case SOp::Neg: return fmt::format("(-{})", a);
    case SOp::Abs: return fmt::format("abs({})", a);
    case SOp::Exp: return fmt::format("exp({})", a);
    case SOp::Log: return fmt::format("log({})", a);
    case SOp::Sqrt: return fmt::format("sqrt({})", a);
    case SOp::Rsqrt: return fmt::format("inverseSqrt({})", a);
    case SOp::Sin: return fmt::format("sin({})", a);
    case SOp::Cos: return fmt::format("cos({})", a);
    case SOp::Tanh: return fmt::format("tanh(clamp({}, -15.0, 15.0))", a);
    case SOp::Sigmoid: return fmt::format("(1.0 / (1.0 + exp(-{})))", a);
    case SOp::Relu: return fmt::format("max({}, 0.0)", a);
    case SOp::Sign: return fmt::format("sign({})", a);
    case SOp::Floor: return fmt::format("floor({})", a);
    case SOp::Round: return fmt::format("round({})", a);  // WGSL round: halfway cases to even
    case SOp::Recip: return fmt::format("(1.0 / {})", a);
    case SOp::Add: return fmt::format("({} + {})", a, b);
    case SOp::Sub: return fmt::format("({} - {})", a, b);
    case SOp::Mul: return fmt::format("({} * {})", a, b);
    case SOp::Div: return fmt::format("({} / {})", a, b);
    case SOp::Pow: return fmt::format("sg_pow({}, {})", a, b);
    case SOp::Max: return fmt::format("max({}, {})", a, b);
    case SOp::Min: return fmt::format("min({}, {})", a, b);
    case SOp::Lt: return fmt::format("f32({} < {})", a, b);
    case SOp::Le: return fmt::format("f32({} <= {})", a, b);
    case SOp::Gt: return fmt::format("f32({} > {})", a, b);
    case SOp::Ge: return fmt::format("f32({} >= {})", a, b);
    case SOp::Eq: return fmt::format("f32({} == {})", a, b);
    case SOp::Ne: return fmt::format("f32({} != {})", a, b);
    case SOp::Select: return fmt::format("select({}, {}, {} != 0.0)", c, b, a);
    case SOp::Const:
    case SOp::Arg: break;
  }
  return "0.0";
}

std::string wgsl_helpers(const std::string& source) {
  std::string s;
  if (source.find("sg_pow(") != std::string::npos)
    s += "fn sg_pow(a: f32, b: f32) -> f32 {  // torch.pow: negative bases with integer exponents\n"
         "  if (b == 0.0) { return 1.0; }\n"
         "  let r = pow(abs(a), b);\n"
         "  if (a < 0.0) {\n"
         "    if (floor(b) != b) { return sg_f32_bits(0x7fc00000u); }\n"
         "    return select(r, -r, b - 2.0 * floor(b * 0.5) == 1.0);\n"
         "  }\n"
         "  return r;\n}\n";
  return s;
}

}  // namespace sg
