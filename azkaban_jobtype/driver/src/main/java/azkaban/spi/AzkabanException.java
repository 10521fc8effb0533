package azkaban.spi;

/**
 * azkaban-spi 3.58.0 is not published on Maven Central (azkaban-common's pom names an unreleased
 * version of it). Azkaban's Flow 2.0 loader only needs this one base exception from it, which upstream
 * is a plain RuntimeException with these constructors; nothing else of azkaban-spi is re-declared.
 */
public class AzkabanException extends RuntimeException {
  public AzkabanException(String message) {
    super(message);
  }

  public AzkabanException(Throwable cause) {
    super(cause);
  }

  public AzkabanException(String message, Throwable cause) {
    super(message, cause);
  }
}
