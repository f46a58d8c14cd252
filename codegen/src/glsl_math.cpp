// The SOp -> GLSL table both emitters print float math with (glsl_math.h).
#include "glsl_math.h"

#include <fmt/format.h>

namespace sg {

std::string glsl_math(SOp op, const std::string& a, const std::string& b, const std::string& c,
                              bool& uses_pow) {
  switch (op) {
    case SOp::Neg: return fmt::format("(-{})", a);
    case SOp::Abs: return fmt::format("abs({})", a);
    case SOp::Exp: return fmt::format("exp({})", a);
    case SOp::Log: return fmt::format("log({})", a);
    case SOp::Sqrt: return fmt::format("sqrt({})", a);
    case SOp::Rsqrt: return fmt::format("inversesqrt({})", a);
    case SOp::Sin: return fmt::format("sin({})", a);
    case SOp::Cos: return fmt::format("cos({})", a);
    case SOp::Tanh: return fmt::format("tanh(clamp({}, -15.0, 15.0))", a);  // avoids exp overflow -> NaN
    case SOp::Sigmoid: return fmt::format("(1.0 / (1.0 + exp(-{})))", a);
    case SOp::Relu: return fmt::format("max({}, 0.0)", a);
    case SOp::Sign: return fmt::format("sign({})", a);
    case SOp::Floor: return fmt::format("floor({})", a);
    case SOp::Round: return fmt::format("roundEven({})", a);
    case SOp::Recip: return fmt::format("(1.0 / {})", a);
    case SOp::Add: return fmt::format("({} + {})", a, b);
    case SOp::Sub: return fmt::format("({} - {})", a, b);
    case SOp::Mul: return fmt::format("({} * {})", a, b);
    case SOp::Div: return fmt::format("({} / {})", a, b);
    case SOp::Pow: uses_pow = true; return fmt::format("sg_pow({}, {})", a, b);
    case SOp::Max: return fmt::format("max({}, {})", a, b);
    case SOp::Min: return fmt::format("min({}, {})", a, b);
    case SOp::Lt: return fmt::format("float({} < {})", a, b);
    case SOp::Le: return fmt::format("float({} <= {})", a, b);
    case SOp::Gt: return fmt::format("float({} > {})", a, b);
    case SOp::Ge: return fmt::format("float({} >= {})", a, b);
    case SOp::Eq: return fmt::format("float({} == {})", a, b);
    case SOp::Ne: return fmt::format("float({} != {})", a, b);
    case SOp::Select: return fmt::format("({} != 0.0 ? {} : {})", a, b, c);
    case SOp::Const:
    case SOp::Arg: break;
  }
  return "0.0";
}

const char* sg_pow_source() {
  return "float sg_pow(float a, float b) {  // torch.pow: negative bases with integer exponents\n"
         "  if (b == 0.0) return 1.0;\n"
         "  float r = pow(abs(a), b);\n"
         "  if (a < 0.0) return (floor(b) == b) ? ((mod(b, 2.0) == 1.0) ? -r : r) : uintBitsToFloat(0x7fc00000u);\n"
         "  return r;\n}\n";
}

}  // namespace sg
