{# The users of a group who sent at least one event of a type, and a rounded share of two counts. #}
{% macro users_who(event_type) -%}
COUNT(DISTINCT CASE WHEN event_type = '{{ event_type }}' THEN user_id END)
{%- endmacro %}

{% macro share(part, whole) -%}
ROUND(CAST({{ part }} AS DOUBLE) / NULLIF({{ whole }}, 0), 4)
{%- endmacro %}
